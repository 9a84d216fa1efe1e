#!/usr/bin/env python3
"""Reference ids and chat renderings for the C++ tokenizer tests, from Hugging Face `tokenizers` and
`transformers` (run where they are installed, e.g. the GPU machine):

    python3 tests/reference/make_tokenizer_fixtures.py \
        --tokenizer-dir models/qwen3-tokenizer \
        --corpus tests/fixtures/tokenizer/corpus.jsonl \
        --out-dir tests/fixtures/tokenizer

Writes, in --out-dir:
  expected.jsonl       first line {"meta": {...}} (source, versions, sha256 of the inputs); then per corpus
                       string {"id", "text", "ids", "ids_no_special", "decoded", "decoded_skip_special"}:
                       ids = Tokenizer.encode(text).ids; ids_no_special = the same with
                       encode_special_tokens=True (special tokens in the text encoded as plain text);
                       decoded* = Tokenizer.decode(ids[, skip_special_tokens=True]).
  chat_template.jsonl  first line {"meta": ...}; then per chat case and template {"name", "template",
                       "messages", "add_generation_prompt", "enable_thinking", "text", "ids", "train_mask"}:
                       text = apply_chat_template(..., tokenize=False); ids = encode(text);
                       train_mask marks every token whose character span overlaps an assistant turn's
                       content + closing <|im_end|> (from after "<|im_start|>assistant\\n" to the end of
                       the next "<|im_end|>"), computed here from HF's offsets.

Templates: "file" is tokenizer_config.json's own chat_template (the bundled Qwen3 file has the
hybrid-thinking template); "instruct2507" is INSTRUCT_2507_TEMPLATE below, the Qwen3-*-Instruct-2507
template (no think block) restricted to what these cases use, or the chat_template of
--instruct-config (a real Qwen3-*-Instruct-2507 tokenizer_config.json) when given.

Needs: python3 with `tokenizers` and `transformers` (and jinja2, which transformers uses). Offline.
"""
import argparse
import hashlib
import json
import os
import sys

# The Qwen3-Instruct-2507 chat template for messages without tool definitions: the same as the hybrid
# Qwen3 template with every <think> rule removed.
INSTRUCT_2507_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.content is string %}\n"
    "        {%- set content = message.content %}\n"
    "    {%- else %}\n"
    "        {%- set content = '' %}\n"
    "    {%- endif %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}"
)


def sys_(c):
    return {"role": "system", "content": c}


def user(c):
    return {"role": "user", "content": c}


def asst(c):
    return {"role": "assistant", "content": c}


def tool(c):
    return {"role": "tool", "content": c}


# (name, messages, add_generation_prompt, enable_thinking or None)
CHAT_CASES = [
    ("user_only_generation", [user("Hello!")], True, None),
    ("system_user_generation", [sys_("You are a helpful assistant."), user("What is 2+2?")], True, None),
    ("no_system_no_generation", [user("Hi"), asst("Hello! How can I help?")], False, None),
    ("system_user_assistant", [sys_("Be brief."), user("Name a color."), asst("Blue.")], False, None),
    ("multi_turn", [sys_("You are terse."), user("First question?"), asst("First answer."),
                    user("Second question?"), asst("Second answer.")], False, None),
    ("multi_turn_generation", [user("a"), asst("b"), user("c")], True, None),
    ("assistant_leading_newline", [user("Write two lines."), asst("\nline one\nline two")], False, None),
    ("assistant_leading_space", [user("Indent?"), asst("   indented answer")], False, None),
    ("assistant_trailing_newlines", [user("x"), asst("answer\n\n")], False, None),
    ("assistant_with_think", [user("Think first."), asst("<think>\nsome reasoning\n</think>\n\nThe answer.")],
     False, None),
    ("earlier_assistant_with_think", [user("q1"), asst("<think>r1</think>a1"), user("q2"), asst("a2")], False, None),
    ("unicode_content", [sys_("Réponds en français."), user("你好，世界！🙂 e\u0301 👨\u200d👩\u200d👧"),
                         asst("Bonjour ! 😀 ça va ? 한국어 ok")], False, None),
    ("system_not_first", [user("u1"), sys_("late system"), user("u2"), asst("a")], False, None),
    ("tool_calls_results", [user("Weather in Paris?"), asst("Let me check."), tool("{\"temp\": 21}"),
                            tool("{\"sky\": \"clear\"}"), asst("21 degrees and clear.")], False, None),
    ("empty_assistant", [user("Say nothing."), asst("")], False, None),
    ("code_content", [user("Code?"), asst("```python\ndef f(x):\n    return x * 2\n```")], False, None),
    ("user_whitespace", [user("  spaced  \n\n"), asst("ok")], False, None),
    ("thinking_disabled_generation", [user("Quick answer please.")], True, False),
    ("only_system_generation", [sys_("System only.")], True, None),
    ("special_text_in_content", [user("What does <|im_end|> mean?"), asst("It marks the end of a turn.")],
     False, None),
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def trained_char_ranges(text):
    """Assistant turns: from after '<|im_start|>assistant\\n' to the end of the next '<|im_end|>'."""
    header, close = "<|im_start|>assistant\n", "<|im_end|>"
    ranges, pos = [], 0
    while True:
        at = text.find(header, pos)
        if at < 0:
            return ranges
        begin = at + len(header)
        end = text.find(close, begin)
        if end < 0:  # the generation prompt: nothing to train
            return ranges
        ranges.append((begin, end + len(close)))
        pos = end + len(close)


def train_mask(offsets, ranges):
    mask = []
    for begin, end in offsets:
        mask.append(1 if any(b < end and begin < e for b, e in ranges) else 0)
    return mask


def load_transformers_tokenizer(tokenizer_dir):
    import transformers
    try:
        return transformers.AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True), "AutoTokenizer"
    except Exception as e:  # a directory without config.json confuses some versions
        print("AutoTokenizer failed (%s); using PreTrainedTokenizerFast" % e, file=sys.stderr)
        with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(tokenizer_dir, "tokenizer.json"))
        tok.chat_template = config.get("chat_template")
        return tok, "PreTrainedTokenizerFast"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    parser.add_argument("--tokenizer-dir", default=os.path.join(root, "models", "qwen3-tokenizer"))
    parser.add_argument("--corpus", default=os.path.join(root, "tests", "fixtures", "tokenizer", "corpus.jsonl"))
    parser.add_argument("--out-dir", default=os.path.join(root, "tests", "fixtures", "tokenizer"))
    parser.add_argument("--instruct-config", default=None,
                        help="tokenizer_config.json of a Qwen3-*-Instruct-2507 model, to use its chat_template")
    args = parser.parse_args()

    import tokenizers
    import transformers

    tokenizer_json = os.path.join(args.tokenizer_dir, "tokenizer.json")
    config_json = os.path.join(args.tokenizer_dir, "tokenizer_config.json")
    tok = tokenizers.Tokenizer.from_file(tokenizer_json)
    meta = {
        "source": "hf",
        "tokenizers_version": tokenizers.__version__,
        "transformers_version": transformers.__version__,
        "python": sys.version.split()[0],
        "tokenizer_json_sha256": sha256_of(tokenizer_json),
        "tokenizer_config_sha256": sha256_of(config_json),
        "corpus_sha256": sha256_of(args.corpus),
    }
    os.makedirs(args.out_dir, exist_ok=True)

    # Corpus ids.
    rows = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    out_path = os.path.join(args.out_dir, "expected.jsonl")
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        out.write(json.dumps({"meta": meta}, ensure_ascii=False) + "\n")
        for row in rows:
            text = row["text"]
            tok.encode_special_tokens = False
            ids = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = True
            ids_no_special = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            out.write(json.dumps({
                "id": row["id"], "text": text, "ids": ids, "ids_no_special": ids_no_special,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
            }, ensure_ascii=False) + "\n")
    print("wrote %d corpus rows to %s" % (len(rows), out_path))

    # Chat template cases.
    hf, loader = load_transformers_tokenizer(args.tokenizer_dir)
    # The published Instruct-2507 template (issue 48; provenance in tests/fixtures/chat-templates/README.md), which
    # nvfp4lm bundles byte for byte; INSTRUCT_2507_TEMPLATE is the reconstruction the first fixtures used.
    published = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "chat-templates",
                             "Qwen-Qwen3-Instruct-2507.jinja")
    with open(published, encoding="utf-8") as f:
        instruct_template, instruct_source = f.read(), "published: tests/fixtures/chat-templates/Qwen-Qwen3-Instruct-2507.jinja"
    if args.instruct_config:
        with open(args.instruct_config, encoding="utf-8") as f:
            instruct_template = json.load(f)["chat_template"]
        instruct_source = args.instruct_config
    templates = [("file", None), ("instruct2507", instruct_template)]
    chat_meta = dict(meta, loader=loader, instruct2507_template=instruct_source)
    out_path = os.path.join(args.out_dir, "chat_template.jsonl")
    count = 0
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        out.write(json.dumps({"meta": chat_meta}, ensure_ascii=False) + "\n")
        for name, messages, add_generation_prompt, enable_thinking in CHAT_CASES:
            for template_name, template in templates:
                kwargs = {}
                if enable_thinking is not None:
                    kwargs["enable_thinking"] = enable_thinking
                if template is not None:
                    kwargs["chat_template"] = template
                text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                              **kwargs)
                encoding = tok.encode(text, add_special_tokens=False)
                out.write(json.dumps({
                    "name": name, "template": template_name, "messages": messages,
                    "add_generation_prompt": add_generation_prompt, "enable_thinking": enable_thinking,
                    "text": text, "ids": encoding.ids,
                    "train_mask": train_mask(encoding.offsets, trained_char_ranges(text)),
                }, ensure_ascii=False) + "\n")
                count += 1
    print("wrote %d chat cases to %s" % (count, out_path))


if __name__ == "__main__":
    main()
