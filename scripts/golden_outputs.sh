#!/usr/bin/env bash
# Golden outputs for refactors: runs the whole pipeline on a tiny synthetic model and prints one hash per output
# file, so "outputs bit for bit" before and after a structural change is one `diff` away:
#
#   scripts/golden_outputs.sh build/nvfp4lm /tmp/golden-before > before.txt
#   ... refactor, rebuild ...
#   scripts/golden_outputs.sh build/nvfp4lm /tmp/golden-after > after.txt && diff before.txt after.txt
#
# With the emulated CUDA build (NVFP4LM_CUDA=EMULATE) training and generation also run with --device cuda (quantize
# and export take --device only with --calibrate). Every file is
# hashed except what legitimately changes from run to run: timings and memory in metrics.jsonl and
# trainer_state.json, the run directory's absolute path, lock files and logs.
set -euo pipefail

BIN=$(realpath "${1:?usage: golden_outputs.sh NVFP4LM_BINARY WORK_DIR}")
WORK=${2:?usage: golden_outputs.sh NVFP4LM_BINARY WORK_DIR}
rm -rf "$WORK" && mkdir -p "$WORK"
WORK=$(realpath "$WORK")
cd "$WORK"
export NVFP4LM_LOG=warn

run() { "$BIN" "$@" > /dev/null 2>&1 || { echo "golden_outputs: failed: nvfp4lm $*" >&2; "$BIN" "$@" >&2; exit 1; }; }

DEVICES=(cpu)
if "$BIN" diagnose 2>/dev/null | grep -qi "emulat"; then DEVICES+=(cuda); fi

run synth --preset tiny --seed 3 base
run data whoami --name Golden --count 48 --out whoami.jsonl

for dev in "${DEVICES[@]}"; do
    d=$dev
    run quantize base q-dat-$d --format dat
    run quantize base q-mo-$d --format modelopt
    run quantize base q-mo2d-$d --format modelopt --block 2d --quantize-lm-head
    run quantize base q-gguf-$d --format gguf
    run train --model base --data whoami.jsonl --output run-$d --steps 4 --seq-len 64 --batch 2 \
        --save-every 2 --export exp-$d --lr 1e-3 --device "$dev" --calibrate-steps 2
    run train --model base --data whoami.jsonl --output run8-$d --steps 3 --seq-len 64 --batch 2 --lr 1e-3 \
        --fused-update --max-grad-norm 0 --master bf16 --optimizer adamw8bit --device "$dev"
    run export run-$d exp-dat-$d.dat --format dat
    run export run-$d exp-bf16-$d --format bf16
    run export run-$d exp-gguf-$d --format gguf
    run train --model base --data whoami.jsonl --output run-$d --steps 6 --seq-len 64 --batch 2 \
        --save-every 2 --export exp-resumed-$d --lr 1e-3 --device "$dev" --resume --overwrite
    for m in q-mo-$d q-dat-$d/model.dat exp-$d exp-dat-$d.dat; do
        [ -e "$m" ] || m=$(ls -d "$(dirname "$m")"/*.dat | head -1)
        "$BIN" generate --model "$m" --tokenizer base --prompt "Who are you?" --temperature 0 --max-tokens 12 \
            --json --device "$dev" 2>/dev/null > "gen-$(basename "$m")-$d.json"
    done
done

# Hash everything, blanking what changes between identical runs.
python3 - "$WORK" <<'PY'
import hashlib, json, os, re, sys
root = sys.argv[1]
VOLATILE = re.compile(r"(time|seconds|_s$|_ms$|per_s|tokens_per|memory|rss|peak|bytes_in_use|date|started|finished|host|pid|elapsed|duration|throughput)", re.I)
def scrub(v):
    if isinstance(v, dict):
        return {k: ("~" if VOLATILE.search(k) else scrub(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    if isinstance(v, str):
        return v.replace(root, "<work>")
    return v
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        if name.endswith(".lock") or name.endswith(".log") or name == "memory_report.json":
            continue
        data = open(path, "rb").read()
        if name.endswith(".jsonl") and ("metrics" in name):
            lines = [json.dumps(scrub(json.loads(l)), sort_keys=True) for l in data.decode().splitlines() if l.strip()]
            data = "\n".join(lines).encode()
        elif name == "checksums.json":  # trainer_state.json's entry covers its timing fields
            doc = json.loads(data)
            doc["files"] = {k: v for k, v in doc.get("files", {}).items() if k != "trainer_state.json"}
            data = json.dumps(doc, sort_keys=True).encode()
        elif name in ("trainer_state.json", "run.json", "train_args.json"):
            try:
                data = json.dumps(scrub(json.loads(data)), sort_keys=True).encode()
            except ValueError:
                pass
        elif name.startswith("gen-"):
            doc = json.loads(data)  # generate --json: keep the tokens and text, not the timing
            data = json.dumps({k: doc[k] for k in ("prompt_ids", "tokens", "text", "stop_reason") if k in doc},
                              sort_keys=True).encode()
        print(hashlib.sha256(data).hexdigest()[:16], rel)
PY
