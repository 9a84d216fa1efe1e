#!/usr/bin/env bash
# Build nvfp4lm on the lent GPU machine (Ubuntu 24.04, H100, 16 cores) and run the checks that need a GPU, in one
# call, printing a short table last. Run from the repository root there, with `.device` carried:
#
#   (here, once)  mkdir -p .device && (cd .device && apt-get download libpcre2-dev)
#   (device run)  scripts/device-check.sh [build] [test] [ptx-probe] [fixtures] [safetensors] [bench-infer]
#                                         [bench-train] [torch]
#
# That machine has CMake, nvcc, OpenBLAS, fmt, CLI11, nlohmann-json, GoogleTest and Google Benchmark but no PCRE2
# headers: Debian's libpcre2-dev (carried in .device/) is unpacked to /tmp and its static library linked.
# Everything it writes goes to $OUT (or out/ without one): logs, JSON results, summary.txt.
set -uo pipefail

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test ptx-probe fixtures safetensors bench-infer bench-train torch)
out=${OUT:-out}
mkdir -p "$out"
build=build-gpu
summary="$out/summary.txt"
: >"$summary"
record() { printf '%-14s %s\n' "$1" "$2" | tee -a "$summary"; }
has_step() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

if ! pkg-config --exists libpcre2-8 2>/dev/null; then
  deb=$(ls .device/libpcre2-dev_*.deb 2>/dev/null | head -1)
  if [ -z "$deb" ]; then
    echo "device-check: PCRE2 headers are missing and .device/libpcre2-dev_*.deb was not carried" >&2
    exit 2
  fi
  mkdir -p /tmp/pcre2 && dpkg -x "$deb" /tmp/pcre2
  rm -f /tmp/pcre2/usr/lib/x86_64-linux-gnu/libpcre2-8.so  # link the static library: no runtime dependency
  sed -i 's|^prefix=.*|prefix=/tmp/pcre2/usr|' /tmp/pcre2/usr/lib/x86_64-linux-gnu/pkgconfig/libpcre2-8.pc
  export PKG_CONFIG_PATH=/tmp/pcre2/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

if has_step build; then
  start=$SECONDS
  if cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4LM_CUDA=ON -DNVFP4LM_CUDA_ARCHS=90a-real \
       -DNVFP4LM_BENCH=OFF >"$out/configure.log" 2>&1 && cmake --build $build -j16 >"$out/build.log" 2>&1; then
    record build "ok in $((SECONDS - start)) s"
  else
    tail -40 "$out/configure.log" "$out/build.log"
    record build "FAILED (see build.log)"
    cat "$summary"
    exit 1
  fi
fi
nv=$build/nvfp4lm

if has_step test; then
  # Every test, CUDA twins included; slow ones too (16 cores).
  ctest --test-dir $build -j8 --timeout 600 --output-junit "$PWD/$out/ctest.xml" >"$out/ctest.log" 2>&1
  record ctest "$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  grep -E '\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception' "$out/ctest.log" | head -30 | tee -a "$summary"
  skipped=$(grep -c '(Skipped)' "$out/ctest.log")
  record skipped "$skipped tests"
fi

if has_step ptx-probe; then
  # The emulated CUDA device against the hardware: every emulated instruction's per-lane results, GPU vs the
  # emulator's committed dump (docs/cuda-emulation.md); any difference beyond the stated ulp bounds is an emulator gap.
  if $build/tests/emu/ptx_probe "$out/ptx_probe_gpu.txt" 2>"$out/ptx_probe.log" &&
    python3 scripts/compare_ptx_probe.py "$out/ptx_probe_gpu.txt" tests/fixtures/emu/ptx_probe.txt \
      >"$out/ptx_probe_compare.txt" 2>&1; then
    record ptx-probe "GPU == emulator ($(grep -c bit-identical "$out/ptx_probe_compare.txt") families)"
  else
    record ptx-probe "DIFFERS (see ptx_probe_compare.txt)"
    head -20 "$out/ptx_probe_compare.txt" | tee -a "$summary"
  fi
fi

if has_step fixtures; then
  # HF transformers cross-check of the committed model fixtures (regenerated into $out, compared there).
  if python3 tests/reference/make_fixtures.py --out "$out/fixtures" >"$out/fixtures.log" 2>&1; then
    record fixtures "$(grep -iE 'transformers|max' "$out/fixtures.log" | tail -1)"
  else
    tail -20 "$out/fixtures.log"
    record fixtures "FAILED (see fixtures.log)"
  fi
fi

if has_step safetensors; then
  # Files nvfp4lm writes load with the `safetensors` package in PyTorch, with the values `info --checksums` reports:
  # a BF16 synth, its F32 twin, and the ModelOpt NVFP4 quantization of each (1D and 2D blocks, lm_head too).
  ok=0 total=0
  $nv synth --preset tiny --overwrite /tmp/st-bf16 >"$out/st.log" 2>&1
  $nv synth --preset tiny --dtype f32 --overwrite /tmp/st-f32 >>"$out/st.log" 2>&1
  $nv quantize /tmp/st-bf16 /tmp/st-nvfp4 --format modelopt --overwrite >>"$out/st.log" 2>&1
  $nv quantize /tmp/st-f32 /tmp/st-nvfp4-2d --format modelopt --block 2d --quantize-lm-head --overwrite \
    >>"$out/st.log" 2>&1
  for m in /tmp/st-bf16 /tmp/st-f32 /tmp/st-nvfp4 /tmp/st-nvfp4-2d; do
    total=$((total + 1))
    $nv info "$m" --json --checksums >"$m.expected.json" 2>>"$out/st.log" &&
      python3 tests/reference/check_safetensors_load.py "$m" "$m.expected.json" >>"$out/st.log" 2>&1 && ok=$((ok + 1))
  done
  record safetensors "$ok of $total models load in torch $(python3 -c 'import torch, safetensors; print(torch.__version__, "safetensors", safetensors.__version__)') with nvfp4lm's values"
fi

if has_step bench-infer; then
  $nv synth --preset qwen3-4b /tmp/q4b >"$out/synth.log" 2>&1
  $nv quantize /tmp/q4b /tmp/q4b-nvfp4 --format modelopt >"$out/quantize.log" 2>&1
  for len in 512 2048; do
    $nv bench infer --model /tmp/q4b-nvfp4 --device cuda --prompt-len $len --gen 256 \
      --json "$out/bench_infer_$len.json" >"$out/bench_infer_$len.log" 2>&1
    record "infer p$len" "$(tail -3 "$out/bench_infer_$len.log" | tr '\n' ' ')"
  done
  # Decode without the CUDA graph (op by op through forward_cached): what the graph saves.
  $nv bench infer --model /tmp/q4b-nvfp4 --device cuda --prompt-len 512 --gen 256 --cuda-graph off \
    --json "$out/bench_infer_nograph.json" >"$out/bench_infer_nograph.log" 2>&1
  record "infer nograph" "$(tail -3 "$out/bench_infer_nograph.log" | tr '\n' ' ')"
  # Peak memory of generation at a 4K context (issue: <= 4 GiB).
  $nv bench infer --model /tmp/q4b-nvfp4 --device cuda --prompt-len 3840 --gen 256 \
    --json "$out/bench_infer_4k.json" >"$out/bench_infer_4k.log" 2>&1
  record "infer 4k" "$(grep -iE 'peak' "$out/bench_infer_4k.log" | tr '\n' ' ')"
fi

if has_step bench-train; then
  # Speed (plain step), the <= 24 GiB recipe and the fp32-master <= 60 GiB mode (issue acceptance).
  for mode in "--qat w4a16" \
    "--qat w4a16 --master bf16 --optimizer adamw8bit --recompute block --packed-weights --fused-update" \
    "--qat w4a16 --recompute block --packed-weights --fused-update"; do
    tag=$(echo "$mode" | tr -d ' -')
    $nv bench train --model /tmp/q4b --device cuda --seq-len 2048 --batch 1 --steps 5 $mode \
      --json "$out/bench_train_$tag.json" >"$out/bench_train_$tag.log" 2>&1
    record "train $tag" "$(tail -3 "$out/bench_train_$tag.log" | tr '\n' ' ')"
  done
fi

if has_step torch; then
  python3 bench/torch_reference.py infer --model /tmp/q4b --prompt-len 512 --gen 256 \
    --json "$out/torch_infer.json" >"$out/torch_infer.log" 2>&1
  record "torch infer" "$(tail -2 "$out/torch_infer.log" | tr '\n' ' ')"
  python3 bench/torch_reference.py train --model /tmp/q4b --seq-len 1024 --batch 8 \
    --json "$out/torch_train.json" >"$out/torch_train.log" 2>&1
  record "torch train" "$(tail -2 "$out/torch_train.log" | tr '\n' ' ')"
fi

echo "==== summary"
cat "$summary"
