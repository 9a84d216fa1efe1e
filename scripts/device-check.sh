#!/usr/bin/env bash
# The checks that need a GPU, in one call on the lent machine (Ubuntu 24.04, H100/H200, 16 cores), printing a
# short table last. Run from the repository root there.
#
#   (here)   scripts/pack-device-build.sh             # build-gpu/ (nvcc, sm_90a) + runtime libraries -> .device/
#   (device) scripts/device-check.sh [unpack|build] [test] [ptx-probe] [fixtures] [safetensors] [bench-infer]
#                                    [bench-train] [torch] [profile-decode]  # with `.device` carried
#
# unpack (the default when .device/build-gpu.tar.xz is there): the binaries built here by pack-device-build.sh,
# with the Debian runtime libraries they link (fmt, OpenBLAS, ...) put first on LD_LIBRARY_PATH;
# building on the device needs -dev packages its image may not have. build: configure and build there. Steps named
# without unpack or build (`bench-train torch`) get the default of the two first.
# Every step has a time cap and the whole run a deadline (DEVICE_CHECK_SECONDS, default 540), so one hang costs
# one step, not the call. Everything goes to $OUT (or out/): summary.txt, and logs.tar.gz with every log and JSON.
set -uo pipefail

steps=("$@")
first=build
[ -f .device/build-gpu.tar.xz ] && first=unpack
if [ ${#steps[@]} -eq 0 ]; then
  steps=("$first" test ptx-probe bench-infer bench-train torch fixtures safetensors)
  # profile-decode (Nsight Compute) is asked for by name
elif [[ " ${steps[*]} " != *" unpack "* && " ${steps[*]} " != *" build "* ]]; then
  steps=("$first" "${steps[@]}")  # e.g. `bench-train torch`: the binaries (and their libraries' path) first
fi
out=${OUT:-out}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
logs="$out/logs"
build=build-gpu
summary="$out/summary.txt"
: >"$summary"
deadline=$((SECONDS + ${DEVICE_CHECK_SECONDS:-540}))
record() { printf '%-16s %s\n' "$1" "$2" | tee -a "$summary"; }
has_step() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
# capped SECONDS CMD...: runs CMD with a limit of SECONDS, or less when the deadline is nearer; 124 on a timeout,
# 125 when no time is left to start it.
capped() {
  local cap=$1 left=$((deadline - SECONDS - 5))
  shift
  [ "$left" -lt 10 ] && return 125
  [ "$cap" -gt "$left" ] && cap=$left
  timeout --kill-after=5 "$cap" "$@"
}
finish() {
  tar -C "$out" -czf "$out/logs.tar.gz" logs 2>/dev/null && rm -rf "$logs"
  echo "==== summary ($((SECONDS)) s)"
  cat "$summary"
}
trap finish EXIT

# The tests find their fixtures and the nvfp4lm executable by the absolute paths of the checkout they were built
# in; give that path to this copy.
if [ -f .device/source-dir ]; then
  src=$(cat .device/source-dir)
  if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
fi

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  nproc
  free -g | sed -n 2p
  df -h /dev/shm /tmp | tail -2
} >"$logs/machine.txt" 2>&1
record device "$(head -1 "$logs/machine.txt")"

if has_step unpack; then
  tar -xJf .device/build-gpu.tar.xz || { record unpack "FAILED"; exit 1; }
  export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  record unpack "$(cat .device/build-info.txt 2>/dev/null | head -1)"
fi

if has_step build; then
  start=$SECONDS
  if ! pkg-config --exists libpcre2-8 2>/dev/null && deb=$(ls .device/libpcre2-dev_*.deb 2>/dev/null | head -1) &&
    [ -n "$deb" ]; then
    mkdir -p /tmp/pcre2 && dpkg -x "$deb" /tmp/pcre2
    rm -f /tmp/pcre2/usr/lib/x86_64-linux-gnu/libpcre2-8.so  # link the static library: no runtime dependency
    sed -i 's|^prefix=.*|prefix=/tmp/pcre2/usr|' /tmp/pcre2/usr/lib/x86_64-linux-gnu/pkgconfig/libpcre2-8.pc
    export PKG_CONFIG_PATH=/tmp/pcre2/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  fi
  # This GPU's own architecture with its "a" features (9.0 -> 90a: wgmma; 12.1 -> 121a: the FP4 mma.sync of
  # cuda/nvfp4-mma-fp4); one architecture keeps the build inside the call.
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  arch="${cc:-90}a-real"
  if capped 400 cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVFP4LM_CUDA=ON \
    -DNVFP4LM_CUDA_ARCHS="$arch" -DNVFP4LM_BENCH=OFF >"$logs/configure.log" 2>&1 &&
    capped 400 cmake --build $build -j16 >"$logs/build.log" 2>&1; then
    record build "ok in $((SECONDS - start)) s for $arch"
  else
    tail -40 "$logs/configure.log" "$logs/build.log"
    record build "FAILED (see build.log)"
    exit 1
  fi
fi
nv=$PWD/$build/nvfp4lm

# cuBLASLt is dlopen'ed by soname: add the toolkit's (or PyTorch's) library directory where it lives.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "$(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null)"; do
  if [ -n "$d" ] && ls "$d"/libcublasLt.so.* >/dev/null 2>&1; then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
    break
  fi
done
{ ldd "$nv"; "$nv" --version; } >"$logs/ldd.txt" 2>&1
record nvfp4lm "$("$nv" --version 2>&1 | head -1)"

# Python and file-format checks that need no GPU, run on the CPU beside the GPU tests (their lines are added to
# the summary at the end).
cpu_checks_fixtures() {
  # The committed model fixtures regenerated with HF transformers present (cross-checked against qwen3_ref.py).
  if (unset LD_LIBRARY_PATH; capped 150 python3 tests/reference/make_fixtures.py --out "$logs/fixtures") \
    >"$logs/fixtures.log" 2>&1; then
    record fixtures "$(grep -iE 'transformers|max' "$logs/fixtures.log" | tail -1 | cut -c1-200)"
    cmp_out=$(for f in $(cd tests/fixtures && ls *.json 2>/dev/null); do
      [ -f "$logs/fixtures/$f" ] && ! cmp -s "tests/fixtures/$f" "$logs/fixtures/$f" && echo "$f"; done | head -5)
    record "fixtures diff" "${cmp_out:-none of the JSON fixtures changed}"
    rm -rf "$logs/fixtures"/*.safetensors
  else
    record fixtures "FAILED (see fixtures.log)"
  fi
}

cpu_checks_safetensors() {
  # Files nvfp4lm writes load with the `safetensors` package in PyTorch, with the values `info --checksums` reports.
  ok=0 total=0
  st=/tmp/st
  {
    "$nv" synth --preset tiny --overwrite $st-bf16
    "$nv" synth --preset tiny --dtype f32 --overwrite $st-f32
    "$nv" quantize $st-bf16 $st-nvfp4 --format modelopt --overwrite
    "$nv" quantize $st-f32 $st-nvfp4-2d --format modelopt --block 2d --quantize-lm-head --overwrite
  } >"$logs/st.log" 2>&1
  for m in $st-bf16 $st-f32 $st-nvfp4 $st-nvfp4-2d; do
    total=$((total + 1))
    "$nv" info "$m" --json --checksums >"$m.expected.json" 2>>"$logs/st.log" &&
      (unset LD_LIBRARY_PATH; python3 tests/reference/check_safetensors_load.py "$m" "$m.expected.json") \
        >>"$logs/st.log" 2>&1 && ok=$((ok + 1))
  done
  record safetensors "$ok of $total models load in torch's safetensors with nvfp4lm's values"
}

cpu_checks() {
  summary="$logs/cpu-checks-summary.txt"
  : >"$summary"
  has_step fixtures && cpu_checks_fixtures
  has_step safetensors && cpu_checks_safetensors
}
cpu_checks >/dev/null 2>&1 &
cpu_checks_pid=$!

# Model files for the benchmarks, made on the CPU while the tests run (memory-backed when there is room).
models=/tmp/nvfp4lm-models
[ "$(df --output=avail -BG /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)" -gt 20 ] 2>/dev/null && models=/dev/shm/nvfp4lm
if has_step bench-infer || has_step profile-decode; then
  mkdir -p $models
  (capped 240 "$nv" synth --preset qwen3-4b --overwrite $models/q4b >"$logs/synth.log" 2>&1 &&
    capped 240 "$nv" quantize $models/q4b $models/q4b-nvfp4 --format modelopt --overwrite >"$logs/quantize.log" 2>&1
  echo $? >"$logs/models.rc") &
  models_pid=$!
fi

if has_step test; then
  # The CUDA test executables (label cuda) on the GPU: each kernel against the CPU fp32 reference, the model and
  # trainer against the CPU and the PyTorch fixtures. Run directly, 4 at a time, from the build directory (their
  # working directory under ctest): ctest's test discovery needs the CMake modules of the machine that configured.
  (cd $build && for t in tests/test_*_cuda; do
    name=$(basename "$t")
    (capped 240 "./$t" --gtest_output="xml:$logs/$name.xml" >"$logs/$name.log" 2>&1
    echo $? >"$logs/$name.rc") &
    while [ "$(jobs -rp | wc -l)" -ge 4 ]; do sleep 1; done
  done
  wait)
  passed=0 failed=0
  for rc in "$logs"/test_*_cuda.rc; do
    name=$(basename "$rc" .rc)
    p=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$logs/$name.log" | tail -1)
    passed=$((passed + ${p:-0}))
    f=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$logs/$name.log")
    failed=$((failed + f))
    record "$name" "rc $(cat "$rc"), ${p:-0} passed, $f failed, $(grep -c '^\[  SKIPPED \]' "$logs/$name.log") skipped"
    grep '^\[  FAILED  \] [A-Za-z]' "$logs/$name.log" | head -8 | tee -a "$summary"
  done
  record "cuda tests" "$passed passed, $failed failed"
fi

if has_step ptx-probe; then
  # The emulated CUDA device against the hardware: every emulated instruction family's per-lane results, GPU vs
  # the emulator's committed dump (docs/cuda-emulation.md).
  if capped 60 $build/tests/emu/ptx_probe "$logs/ptx_probe_gpu.txt" 2>"$logs/ptx_probe.log" &&
    python3 scripts/compare_ptx_probe.py "$logs/ptx_probe_gpu.txt" tests/fixtures/emu/ptx_probe.txt \
      >"$logs/ptx_probe_compare.txt" 2>&1; then
    record ptx-probe "GPU == emulator ($(grep -c bit-identical "$logs/ptx_probe_compare.txt") bit-identical families)"
  else
    record ptx-probe "DIFFERS or failed (see ptx_probe_compare.txt, ptx_probe.log)"
    head -12 "$logs/ptx_probe_compare.txt" "$logs/ptx_probe.log" 2>/dev/null | tee -a "$summary"
  fi
fi

if has_step profile-decode; then
  # Where decode and prefill time goes: every kernel's duration (Nsight Compute, one pass each) over one op-by-op
  # decode step (the CUDA graph's nodes are the same kernels) and over a 512-token prefill of the qwen3-4b NVFP4
  # model, as CSV (scripts/kernel_times.py sums them by kernel).
  wait $models_pid
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  capped 90 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 1600 --launch-count 740 \
    "$nv" bench infer --model $models/q4b-nvfp4 --device cuda --prompt-len 16 --gen 8 --cuda-graph off \
    >"$logs/profile_decode.csv" 2>"$logs/profile_decode.log"
  record "profile decode" "rc $? $(python3 scripts/kernel_times.py "$logs/profile_decode.csv" 2>&1 | head -4 | tr '\n' ' ')"
  capped 90 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --launch-count 1200 \
    "$nv" bench infer --model $models/q4b-nvfp4 --device cuda --prompt-len 512 --gen 1 --cuda-graph off \
    >"$logs/profile_prefill.csv" 2>"$logs/profile_prefill.log"
  record "profile prefill" "rc $? $(python3 scripts/kernel_times.py "$logs/profile_prefill.csv" 2>&1 | head -4 | tr '\n' ' ')"
fi

bench_line() { python3 - "$1" <<'EOF' 2>/dev/null || tail -2 "${1%.json}.log" | tr '\n' ' '
import json, sys
r = json.load(open(sys.argv[1]))
keys = ["compute_path", "decode_steps", "prefill_tokens_per_s", "cold_prefill_seconds", "decode_tokens_per_s",
        "weight_bandwidth_percent_of_copy", "copy_gb_per_s", "tokens_per_s", "step_ms", "forward_backward_ms",
        "optimizer_ms", "refresh_ms", "achieved_gflop_per_s", "ratio_of_ceiling", "first_loss", "last_loss",
        "peak_device_bytes"]
out = []
for k in keys:
    if k in r:
        v = r[k]
        if k == "peak_device_bytes":
            out.append(f"peak={v / 2**30:.2f}GiB")
        elif isinstance(v, float):
            out.append(f"{k.replace('_tokens_per_s', '')}={v:.4g}")
        else:
            out.append(f"{k}={v}")
for b in r.get("batched_decode", []):
    out.append(f"batch{b['batch']}={b['decode_tokens_per_s']:.4g}({b['speedup_over_batch_1']:.1f}x)")
print(" ".join(out))
EOF
}

if has_step bench-infer; then
  wait $models_pid
  record models "synth+quantize rc $(cat "$logs/models.rc" 2>/dev/null || echo '?') in $models"
  # prompt, generated, graph, extra flags. The first run also measures batched decode (issue 26: batch 8 and 32
  # against batch 1 through the same step) and prints the graph's node count in its "decode steps" line.
  runs=("512 256 on --batch=8 --batch=32" "2048 256 on" "512 256 off" "3840 256 on")
  [ -n "${INFER_RUNS:-}" ] && runs=("${runs[@]:0:$INFER_RUNS}")  # the first N only (a short call)
  for run in "${runs[@]}"; do
    set -- $run
    tag=p$1-graph$3
    capped 150 "$nv" bench infer --model $models/q4b-nvfp4 --device cuda --prompt-len "$1" --gen "$2" \
      --cuda-graph "$3" "${@:4}" --json "$logs/infer_$tag.json" >"$logs/infer_$tag.log" 2>&1
    rc=$?
    record "infer $tag" "rc $rc $(bench_line "$logs/infer_$tag.json")"
  done
  # A W4A4 checkpoint on Blackwell (issue 47): the same synthetic model calibrated on text (input_scale on every
  # linear), its layers on the FP4 tensor cores (cuda/nvfp4-mma-fp4 on 12.x, cuda/nvfp4-cublaslt-fp4 on 10.x: the
  # header line says which), against the same checkpoint with 16-bit activations (--w4a4 off).
  case "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)" in
    10.*|12.*)
      printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 200) >"$models/calibration.txt"
      capped 240 "$nv" quantize $models/q4b $models/q4b-w4a4 --format modelopt --overwrite --device cuda \
        --calibrate "$models/calibration.txt" >"$logs/quantize_w4a4.log" 2>&1
      for w4a4 in on off; do
        capped 150 "$nv" bench infer --model $models/q4b-w4a4 --device cuda --prompt-len 512 --gen 256 \
          --cuda-graph on --w4a4 $w4a4 --batch=8 --json "$logs/infer_w4a4_$w4a4.json" >"$logs/infer_w4a4_$w4a4.log" 2>&1
        record "infer w4a4 $w4a4" "rc $? $(bench_line "$logs/infer_w4a4_$w4a4.json")"
      done ;;
  esac
  # Run-time LoRA (issue 31): two random rank-16 adapters on every linear (predicted: about double a batch-1 step,
  # bench/NOTES.md 2026-11-29 ninth session); batch 8 rows alternate between them.
  if [ -z "${INFER_RUNS:-}" ]; then
    for a in 0 1; do python3 scripts/make_random_lora.py $models/q4b/config.json $models/lora$a --seed $a \
      >>"$logs/lora_make.log" 2>&1; done
    capped 150 "$nv" bench infer --model $models/q4b-nvfp4 --device cuda --prompt-len 512 --gen 256 --cuda-graph on \
      --lora a=$models/lora0 --lora b=$models/lora1 --batch=8 --json "$logs/infer_lora.json" >"$logs/infer_lora.log" 2>&1
    record "infer lora x2" "rc $? $(bench_line "$logs/infer_lora.json")"
  fi
fi

if has_step bench-train; then
  # Speed (plain step), the <= 24 GiB recipe, the fp32-master <= 60 GiB mode (issue 27) and LoRA rank 16 over the
  # base kept packed (issue 31: <= 8 GiB predicted).
  # On Blackwell (SM 12.x, a GB10; SM 10.x, a B200) also W4A4, whose layer linears run on the FP4 tensor cores
  # (cuda/nvfp4-mma-fp4 / cuda/nvfp4-cublaslt-fp4; the compute path in its line says whether they did).
  modes=("--qat w4a16" \
    "--qat w4a16 --master bf16 --optimizer adamw8bit --recompute block --packed-weights --fused-update" \
    "--qat w4a16 --recompute block --packed-weights --fused-update" \
    "--qat w4a16 --lora 16 --recompute block")
  case "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)" in
    10.*|12.*) modes+=("--qat w4a4") ;;
  esac
  for mode in "${modes[@]}"; do
    tag=$(echo "$mode" | sed 's/--qat w4a16//; s/--qat w4a4/w4a4/; s/--//g; s/ /_/g; s/^_*//')
    tag=${tag:-plain}
    capped 120 "$nv" bench train --preset qwen3-4b --device cuda --seq-len 2048 --batch 1 --steps 5 $mode \
      --json "$logs/train_$tag.json" >"$logs/train_$tag.log" 2>&1
    rc=$?
    record "train ${tag:0:12}" "rc $rc $(bench_line "$logs/train_$tag.json")"
  done
fi

if has_step torch; then
  (unset LD_LIBRARY_PATH
  capped 120 python3 bench/torch_reference.py infer --preset qwen3-4b --prompt-len 512 --gen 256 --settings sdpa \
    --json "$logs/torch_infer.json" >"$logs/torch_infer.log" 2>&1
  capped 90 python3 bench/torch_reference.py infer --preset qwen3-4b --prompt-len 2048 --gen 8 --settings sdpa \
    --json "$logs/torch_infer_2048.json" >"$logs/torch_infer_2048.log" 2>&1
  capped 150 python3 bench/torch_reference.py train --preset qwen3-4b --seq-len 2048 --batch 1 --steps 6 \
    --json "$logs/torch_train.json" >"$logs/torch_train.log" 2>&1)
  record "torch infer" "$(grep '^{' "$logs/torch_infer.log" | tr '\n' ' ' | cut -c1-300)"
  record "torch p2048" "$(grep '^{' "$logs/torch_infer_2048.log" | tr '\n' ' ' | cut -c1-300)"
  record "torch train" "$(grep '^{' "$logs/torch_train.log" | tr '\n' ' ' | cut -c1-300)"
fi

wait "$cpu_checks_pid"
cat "$logs/cpu-checks-summary.txt" >>"$summary"
