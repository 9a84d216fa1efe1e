#!/usr/bin/env bash
# PTQ vs QAT vs QAD on a real corpus (issues 14, 30): how much NVFP4 costs a model, and how much QAT and
# quantization-aware distillation win back.
#
#   bench/quality.sh [WORK_DIR]        (default bench-quality/; the numbers go to WORK_DIR/results.md)
#
# 1. Corpus: the English fortune cookies of Debian's `fortunes-min` and `fortunes` packages (literature, wisdom,
#    science, people, ...) and the Chinese of `fortunes-zh` (Debian's code of conduct and hints in Chinese, 300 Tang
#    poems, 100 Song ci), 3.4 MB in all,
#    fetched with `apt-get download` (nothing is installed) and extracted with dpkg-deb; colour escapes removed,
#    one document per cookie. Every 20th document (English and Chinese alike) is held out.
# 2. A small Qwen3 (4 layers, hidden 192, intermediate 576, vocabulary 512: 1.8 M parameters; the fixture tokenizer
#    cut from Qwen3's, byte-level, so Chinese is a few tokens a character) trained from scratch in fp32 without QAT
#    (`--qat off`; "bf16" below, the unquantized baseline, exported as BF16) on the rest.
# 3. Versions of it, each scored by `nvfp4lm eval` on the held-out text (sliding windows of SEQ_LEN tokens, stride
#    SEQ_LEN / 2) with the BF16 model as --reference (KL(BF16 || version), top-1 agreement):
#      bf16       the trained model itself
#      ptq-1d     `quantize --format modelopt` (round-to-nearest, 1x16 blocks)
#      ptq-2d     `quantize --format modelopt --block 2d` (16x16 tiles)
#      qat-1d     QAT w4a16 fine-tuning of the BF16 checkpoint for QAT_STEPS steps (cross-entropy on the corpus),
#                 exported as ModelOpt NVFP4
#      qad-1d     the same steps with quantization-aware distillation instead: `--distill-from bf16` (KL to the
#                 BF16 model's token distribution, temperature 1, no cross-entropy), as ModelOpt's QAD
#      qad-top32  QAD from a teacher cache instead of the teacher: `nvfp4lm distill-cache --top-k 32` once over the
#                 batches the run takes (its seed and steps), then `--distill-from` the cache (the KL over the
#                 teacher's 32 most likely tokens and the rest of the vocabulary as one outcome)
#    and, so the QAT row is not just "more training", bf16-more: the same QAT_STEPS steps without QAT (--qat off),
#    and ptq-more: its round-to-nearest quantization. QAT and QAD are scored against both: bf16 (what QAD recovers
#    towards) and bf16-more (as long a training without quantization).
# CPU only; the sizes below keep it to tens of minutes on 2 cores. Everything is deterministic (seeded).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${NVFP4LM:-$ROOT/build/nvfp4lm}
WORK=${1:-bench-quality}
PRETRAIN_STEPS=${PRETRAIN_STEPS:-600}
QAT_STEPS=${QAT_STEPS:-200}
SEQ_LEN=${SEQ_LEN:-128}
BATCH=${BATCH:-8}
EVAL_TOKENS=${EVAL_TOKENS:-20000}
TOKENIZER=$ROOT/tests/fixtures/tiny-tokenizer

mkdir -p "$WORK"
cd "$WORK"

# ---- 1. corpus ---------------------------------------------------------------------------------------------------
if [ ! -f corpus/train.txt ]; then
  mkdir -p debs corpus
  (cd debs && apt-get download fortunes-min fortunes fortunes-zh >/dev/null 2>&1)
  for deb in debs/*.deb; do dpkg-deb -x "$deb" extracted; done
  dir=extracted/usr/share/games/fortunes
  english="literature wisdom science people politics work art men-women education computers definitions songs-poems"
  chinese="chinese tang300 song100"
  : > corpus/all.txt
  for name in $english $chinese; do
    # Cookies are separated by lines holding "%"; strip ANSI colour codes; a blank line between documents.
    sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^%$//' "$dir/$name" | tr -d '\r' >> corpus/all.txt
    printf '\n\n' >> corpus/all.txt
  done
  # Documents are runs of non-blank lines; every 20th goes to the held-out file.
  awk 'BEGIN { RS = ""; ORS = "\n\n" } { if (NR % 20 == 0) print > "corpus/heldout.txt"; else print > "corpus/train.txt" }' \
    corpus/all.txt
  rm -rf extracted
fi
echo "corpus: $(wc -c < corpus/train.txt) bytes to train on, $(wc -c < corpus/heldout.txt) held out"

# ---- 2. the BF16 model, from scratch -----------------------------------------------------------------------------
cat > config.json <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 512, "hidden_size": 192,
 "intermediate_size": 576, "num_hidden_layers": 4, "num_attention_heads": 6, "num_key_value_heads": 2,
 "head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "max_position_embeddings": 4096,
 "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "float32", "bos_token_id": 1,
 "eos_token_id": 2}
EOF
common=(--tokenizer "$TOKENIZER" --data-format text --seq-len "$SEQ_LEN" --batch "$BATCH" --seed 1 --keep 1)
if [ ! -d bf16 ]; then
  "$BIN" synth --config config.json --dtype f32 --tokenizer "$TOKENIZER" --seed 1 init
  "$BIN" train --model init --data corpus/train.txt "${common[@]}" --qat off --max-steps "$PRETRAIN_STEPS" \
    --lr 3e-3 --warmup 50 --weight-decay 0.01 --output run-bf16 --export bf16 --export-format bf16 2> train-bf16.log
fi

# ---- 3. versions ---------------------------------------------------------------------------------------------------
[ -d ptq-1d ] || "$BIN" quantize bf16 ptq-1d --format modelopt > /dev/null 2> quantize-1d.log
[ -d ptq-2d ] || "$BIN" quantize bf16 ptq-2d --format modelopt --block 2d > /dev/null 2> quantize-2d.log
if [ ! -d qat-1d ]; then
  "$BIN" train --model bf16 --data corpus/train.txt "${common[@]}" --qat w4a16 --max-steps "$QAT_STEPS" \
    --lr 3e-4 --warmup 20 --weight-decay 0.01 --output run-qat --export qat-1d 2> train-qat.log
fi
if [ ! -d qad-1d ]; then
  "$BIN" train --model bf16 --data corpus/train.txt "${common[@]}" --qat w4a16 --max-steps "$QAT_STEPS" \
    --lr 3e-4 --warmup 20 --weight-decay 0.01 --distill-from bf16 --output run-qad --export qad-1d 2> train-qad.log
fi
if [ ! -f teacher-top32.safetensors ]; then
  "$BIN" distill-cache --model bf16 --distill-from bf16 --data corpus/train.txt --tokenizer "$TOKENIZER" \
    --data-format text --seq-len "$SEQ_LEN" --batch "$BATCH" --seed 1 --max-steps "$QAT_STEPS" --top-k 32 \
    --output teacher-top32.safetensors \
    > distill-cache.out 2> distill-cache.log
fi
if [ ! -d qad-top32 ]; then
  "$BIN" train --model bf16 --data corpus/train.txt "${common[@]}" --qat w4a16 --max-steps "$QAT_STEPS" \
    --lr 3e-4 --warmup 20 --weight-decay 0.01 --distill-from teacher-top32.safetensors --output run-qad-top32 \
    --export qad-top32 2> train-qad-top32.log
fi
if [ ! -d bf16-more ]; then
  "$BIN" train --model bf16 --data corpus/train.txt "${common[@]}" --qat off --max-steps "$QAT_STEPS" \
    --lr 3e-4 --warmup 20 --weight-decay 0.01 --output run-more --export bf16-more --export-format bf16 \
    2> train-more.log
fi
[ -d ptq-more ] || "$BIN" quantize bf16-more ptq-more --format modelopt > /dev/null 2> quantize-more.log

# ---- 4. eval -------------------------------------------------------------------------------------------------------
# Each version against the unquantized model it was made from: the PTQ rows against bf16; the rows that trained
# QAT_STEPS more steps against bf16-more, which trained as long without QAT.
printf '| model | reference | eval loss | perplexity | token acc. | KL(ref ‖ model) mean | p99 | top-1 agreement |\n' \
  > results.md
printf '|---|---|---|---|---|---|---|---|\n' >> results.md
for pair in bf16:bf16 ptq-1d:bf16 ptq-2d:bf16 qat-1d:bf16 qad-1d:bf16 qad-top32:bf16 bf16-more:bf16-more \
  ptq-more:bf16-more qat-1d:bf16-more qad-1d:bf16-more qad-top32:bf16-more; do
  model=${pair%%:*} reference=${pair##*:}
  "$BIN" eval --model "$model" --tokenizer "$TOKENIZER" --data corpus/heldout.txt --data-format text \
    --seq-len "$SEQ_LEN" --stride $((SEQ_LEN / 2)) --max-tokens "$EVAL_TOKENS" --reference "$reference" --json \
    > "eval-$model-$reference.json" 2> "eval-$model-$reference.log"
  python3 - "$model" "$reference" "eval-$model-$reference.json" >> results.md <<'EOF'
import json, sys
r = json.load(open(sys.argv[3])); ref = r["reference"]
print(f"| {sys.argv[1]} | {sys.argv[2]} | {r['loss']:.4f} | {r['perplexity']:.3f} | {100 * r['token_accuracy']:.2f}% | "
      f"{ref['kl_mean']:.5f} | {ref['kl_p99']:.4f} | {100 * ref['top1_agreement']:.2f}% |")
EOF
done
echo "teacher cache: $(head -1 distill-cache.out)" >> results.md
echo "tokens scored per model: $(python3 -c "import json; print(json.load(open('eval-bf16-bf16.json'))['tokens'])")" \
  >> results.md
cat results.md
