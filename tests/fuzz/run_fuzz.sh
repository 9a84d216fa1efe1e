#!/usr/bin/env bash
# Runs the libFuzzer targets of a -DNVFP4LM_FUZZ=ON build (what `make fuzz` calls):
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS [TARGET...]        (default: every target with a corpus directory)
# Each target runs for SECONDS seconds, reading its committed seeds (tests/fuzz/corpus/<target>/, and
# tests/fuzz/regressions/<target>/ when present) and keeping what it finds in BUILD_DIR/fuzz-work/<target>/corpus/,
# so successive runs build on each other without writing into the repository. Options per target: -max_len below,
# -dict=tests/fuzz/<target>.dict when there is one, -timeout=10 -rss_limit_mb=4096. Targets run FUZZ_PARALLEL at a
# time (default: the number of cores). FUZZ_RUNS=N also stops each target after N executions, whichever comes first
# (issue 17's acceptance run: FUZZ_RUNS=1000000 with SECONDS=1800). Crash, leak, timeout and out-of-memory inputs
# land in BUILD_DIR/fuzz-work/<target>/artifacts/; the script prints each one with the top of its report and exits 1.
# Per-target statistics (executions, exec/s, corpus size) are printed at the end.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
parallel=${FUZZ_PARALLEL:-$(nproc)}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for dir in "$here"/corpus/*/; do targets+=("$(basename "$dir")"); done
fi

max_len() {
  case $1 in
    safetensors | dat | gguf) echo 65536 ;;
    tokenizer_json) echo 32768 ;;
    tokenizer_config | trainer_state) echo 16384 ;;
    dataset_*) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# The targets write their inputs to files: keep those on tmpfs, and gone afterwards.
scratch_root=/dev/shm
[ -d "$scratch_root" ] && [ -w "$scratch_root" ] || scratch_root="$build/fuzz-work"
export NVFP4LM_FUZZ_SCRATCH="$scratch_root/nvfp4lm-fuzz-run-$$"
mkdir -p "$NVFP4LM_FUZZ_SCRATCH"
trap 'rm -rf "$NVFP4LM_FUZZ_SCRATCH"' EXIT

run_target() {
  local target=$1
  local binary="$build/tests/fuzz/fuzz_$target"
  local work="$build/fuzz-work/$target"
  mkdir -p "$work/corpus" "$work/artifacts"
  local seeds=("$here/corpus/$target")
  [ -d "$here/regressions/$target" ] && seeds+=("$here/regressions/$target")
  local dict=()
  [ -f "$here/$target.dict" ] && dict=("-dict=$here/$target.dict")
  local runs=()
  [ -n "${FUZZ_RUNS:-}" ] && runs=("-runs=$FUZZ_RUNS")
  "$binary" "$work/corpus" "${seeds[@]}" "${dict[@]}" -max_total_time="$seconds" "${runs[@]}" -max_len="$(max_len "$target")" \
    -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/fuzz.log" 2>&1 &&
    echo 0 >"$work/exit_code" || echo $? >"$work/exit_code"
}

missing=0
for target in "${targets[@]}"; do
  if [ ! -x "$build/tests/fuzz/fuzz_$target" ]; then
    echo "run_fuzz: $build/tests/fuzz/fuzz_$target is missing (configure with -DNVFP4LM_FUZZ=ON and build fuzz_targets)" >&2
    missing=1
  fi
done
[ $missing -eq 0 ] || exit 2

echo "run_fuzz: ${#targets[@]} targets, ${seconds}s each, $parallel at a time; work in $build/fuzz-work"
running=0
for target in "${targets[@]}"; do
  rm -f "$build/fuzz-work/$target/artifacts/"* "$build/fuzz-work/$target/exit_code" 2>/dev/null || true
  run_target "$target" &
  running=$((running + 1))
  if [ $running -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
printf '%-18s %12s %9s %8s  %s\n' target executions exec/s corpus result
for target in "${targets[@]}"; do
  code=$(cat "$build/fuzz-work/$target/exit_code" 2>/dev/null || echo "?")
  log="$build/fuzz-work/$target/fuzz.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$build/fuzz-work/$target/corpus" -type f | wc -l)
  artifacts=$(find "$build/fuzz-work/$target/artifacts" -type f | sort)
  result=ok
  if [ "$code" != 0 ] || [ -n "$artifacts" ]; then
    result="FAILED (exit $code)"
    failed+=("$target")
  fi
  printf '%-18s %12s %9s %8s  %s\n' "$target" "${runs:-?}" "${speed:-?}" "$corpus" "$result"
done

for target in "${failed[@]}"; do
  log="$build/fuzz-work/$target/fuzz.log"
  echo
  echo "==== $target: finding; log $log"
  grep -m1 -E "^==[0-9]+==ERROR|FUZZ FINDING|^SUMMARY|ALARM: working on the last Unit|out-of-memory|terminate called|uncaught" "$log" || true
  # The first frames outside libc, libstdc++, the sanitizer runtimes and libFuzzer: where it happened.
  grep -E "^ +#[0-9]+ " "$log" | grep -vE "libc\.so|libstdc\+\+|compiler-rt|sanitizer|fuzzer::|crtstuff|/nptl/|/stdlib/|/signal/" |
    head -8 | cut -c1-240 || true
  for artifact in "$build/fuzz-work/$target/artifacts/"*; do
    [ -f "$artifact" ] || continue
    echo "reproducer: $artifact"
    echo "  replay:   $build/tests/fuzz/fuzz_$target $artifact"
    echo "  minimize: $build/tests/fuzz/fuzz_$target -minimize_crash=1 -max_total_time=60 $artifact"
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo
  echo "run_fuzz: findings in ${failed[*]}; keep each minimized reproducer as tests/fuzz/regressions/<target>/<name>"
  exit 1
fi
echo "run_fuzz: no findings"
