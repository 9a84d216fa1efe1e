#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/corpus.jsonl: the strings the tokenizer is checked on, one JSON object a
line: {"id": N, "category": "...", "text": "..."}. Deterministic (fixed seed, no dependencies beyond the
standard library): re-running gives the same file byte for byte.

    python3 tests/reference/make_tokenizer_corpus.py [--out tests/fixtures/tokenizer/corpus.jsonl]

Categories cover what breaks tokenizers: scripts (Latin, CJK simplified/traditional, Japanese, Korean,
Arabic, Hebrew, Devanagari, Thai, Cyrillic, Greek), emoji (ZWJ sequences, flags, skin tones, keycaps),
code, numbers of many lengths (Qwen splits digits one by one), whitespace runs, CRLF, English contractions
in mixed case, special and added tokens, combining characters and non-NFC input, unusual but valid UTF-8,
and long words (which exercise the O(n log n) merge path).
"""
import argparse
import json
import os
import random

SEED = 20250721


def english():
    return [
        "Hello world",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "  leading spaces and trailing spaces  ",
        "A sentence with \"double quotes\", 'single quotes', and (parentheses) [brackets] {braces}.",
        "Mr. Smith paid $1,234.56 for 3 items on 2024-01-15 at 10:30am -- a 15% discount!",
        "e.g., i.e., etc., vs. ... and ellipsis\u2026 em\u2014dash en\u2013dash",
        "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
        "camelCaseIdentifier snake_case_identifier kebab-case-identifier PascalCase",
        "https://example.com/path/to/page?query=value&other=1#fragment",
        "email@example.com, first.last+tag@sub.domain.org",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.",
        "It was the best of times, it was the worst of times, it was the age of wisdom.",
        "Question? Answer! Statement. Exclamation!!! Interrobang?!",
        "Tabs\tbetween\twords",
        "Naïve café résumé façade coöperate Zürich São Paulo",
        "\u201cSmart quotes\u201d and \u2018apostrophes\u2019 are common in copied text.",
        "a",
        " ",
        "",
        "I",
        "!",
        "x y z",
    ]


def contractions():
    return [
        "I'm you're he's she's it's we're they're",
        "I'M YOU'RE HE'S SHE'S IT'S WE'RE THEY'RE",
        "I'll you'll we'll they'll I'LL YOU'LL We'Ll",
        "I've you've we've I'VE We'Ve",
        "I'd you'd he'd I'D YOU'D",
        "don't can't won't shouldn't DON'T Can'T",
        "The cat's toy and the CAT'S TOY and the Cat'S",
        "'s 's 'S 't 're 've 'm 'll 'd",
        "rock'n'roll o'clock y'all ma'am",
        "it\u2019s typographic apostrophe it\u2019S",
        "it'\u017f long s",
        "'''triple''' and '' double",
        "He said 'hello' and 'goodbye'",
    ]


def cjk():
    return [
        "你好，世界！",
        "我们今天去公园散步，天气非常好。",
        "人工智能正在改变世界，深度学习是其中的关键技术之一。",
        "中华人民共和国成立于1949年10月1日。",
        "繁體中文：臺灣的風景非常美麗，歡迎來訪。",
        "龍鳳呈祥，學習語言需要長時間的練習與耐心。",
        "簡體與繁體：学习／學習，语言／語言，国家／國家",
        "日本語のテキスト：今日はいい天気ですね。",
        "カタカナとひらがなと漢字が混ざった文章です。",
        "ｶﾀｶﾅ半角カタカナ と 全角ＡＢＣ１２３",
        "東京都渋谷区で「こんにちは」と言いました。",
        "한국어 텍스트입니다. 안녕하세요!",
        "대한민국의 수도는 서울입니다. 한글은 세종대왕이 만들었습니다.",
        "中文English混合mixed文本text",
        "《红楼梦》是中国古典小说的巅峰之作——曹雪芹著。",
        "数字１２３和123混合，标点，。！？",
        "𠀀𠀁𠀂 CJK Extension B characters 𪚥",
    ]


def other_scripts():
    return [
        "مرحبا بالعالم",
        "اللغة العربية جميلة جداً.",
        "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
        "שלום עולם",
        "नमस्ते दुनिया",
        "हिन्दी भाषा में लिखा गया वाक्य।",
        "สวัสดีชาวโลก",
        "Привет, мир! Как дела?",
        "Γειά σου Κόσμε! Ελληνικά κείμενα.",
        "Tiếng Việt có nhiều dấu: Xin chào, tôi là người Việt Nam.",
        "Türkçe: İstanbul, ığdır, ŞİŞLİ",
        "Deutsch: Straße, groß, Äpfel, Öl, Übung",
        "Polski: Zażółć gęślą jaźń",
        "ქართული ენა",
        "Հայերեն լեզու",
        "አማርኛ ቋንቋ",
        "தமிழ் மொழி",
        "ᚠᚢᚦᚨᚱᚲ runes",
    ]


def emoji():
    return [
        "😀😃😄😁",
        "I love 🍕 and 🍣!",
        "👨\u200d👩\u200d👧\u200d👦 family",
        "👩\u200d💻 woman technologist, 👨\u200d🔬 man scientist",
        "🏳\ufe0f\u200d🌈 rainbow flag, 🏴\u200d☠\ufe0f pirate flag",
        "🇺🇸🇬🇧🇯🇵🇨🇳🇩🇪🇫🇷 flags",
        "👍🏻👍🏼👍🏽👍🏾👍🏿 skin tones",
        "🧑🏽\u200d🤝\u200d🧑🏿 people holding hands",
        "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3 keycaps",
        "❤\ufe0f ❤ ♥ ✨ ⭐ ☀\ufe0f text vs emoji presentation",
        "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f Scotland",
        "emoji at end 🎉",
        "🎉emoji at start",
        "🤖🤖🤖🤖🤖🤖🤖🤖",
    ]


def code():
    return [
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
        "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape)  # (3, 4)\n",
        "#include <iostream>\n\nint main() {\n  std::cout << \"Hello\" << std::endl;\n  return 0;\n}\n",
        "template <typename T>\nT max(T a, T b) { return a > b ? a : b; }",
        "const f = async (x) => { await fetch(`/api/${x}`); };\n",
        "fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
        "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
        "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;",
        "<html>\n  <body>\n    <div class=\"main\">Text &amp; more</div>\n  </body>\n</html>",
        "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "#!/bin/bash\nfor f in *.txt; do\n  echo \"$f\" | tr 'a-z' 'A-Z'\ndone\n",
        "x += 1; y -= 2; z *= 3; w /= 4; a <<= 1; b >>= 2; c &&= d; e ||= f; g ??= h;",
        "if (a != b && c <= d || !e) { return -1; }",
        "\t\tdeeply\n\t\t\tindented\n\t\ttabs\n",
        "    four spaces\n        eight spaces\n            twelve\n",
        "public static void main(String[] args) throws IOException {}",
        "matrix[i][j] = matrix[i-1][j-1] + 1;",
        "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
        "regex = r'^(?:[a-z0-9!#$%&*+/=?^_`{|}~-]+)$'",
        "0x1F 0xDEADBEEF 0b1010 0o777 1e-10 3.14159f 42ULL",
        "```python\nprint('fenced')\n```",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
        "\\begin{equation} E = mc^2 \\end{equation}",
    ]


def numbers():
    rng = random.Random(SEED + 1)
    out = []
    for length in list(range(1, 21)) + [25, 32, 40, 64, 100]:
        out.append("".join(rng.choice("0123456789") for _ in range(length)))
    out += [
        "3.14159265358979323846",
        "1,000,000 and 1.000.000 and 1 000 000",
        "-42 +42 ±42 42° 42% 42‰",
        "Call +1 (555) 123-4567 or 555.123.4567",
        "Version v1.2.3-rc.4+build.567",
        "2024-12-31T23:59:59.999Z",
        "1st 2nd 3rd 4th 21st 101st",
        "Room 101, Floor 12, Building 7B",
        "١٢٣٤٥ Arabic-Indic digits ۱۲۳ and ०१२३ Devanagari",
        "①②③ ⅠⅡⅢ ½ ¾ ² ³ superscripts",
        "１２３４５ fullwidth digits",
        "0.000001 1e6 6.022e23 1E-9",
        "$19.99 €20,00 £15 ¥1000 ₹500",
    ]
    return out


def whitespace():
    out = []
    for n in [1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 33]:
        out.append("a" + " " * n + "b")
    out += [
        "\t", "\t\t\t", "\n", "\n\n", "\n\n\n\n\n", "\r\n", "\r\n\r\n", "\r", "\r\r\n",
        "line one\r\nline two\r\nline three\r\n",
        "mixed \t \n \r\n whitespace",
        "   \n   \n   ",
        "trailing spaces   ",
        "   leading spaces",
        "word\n\n\nword",
        " \n",
        "\n ",
        "a \n b",
        "end with newline\n",
        "spaces before newline    \nnext",
        "nbsp\u00a0between\u00a0words",
        "ideographic\u3000space\u3000here",
        "line\u2028separator and paragraph\u2029separator",
        "next\u0085line",
        "zero\u200bwidth\u200bspace",
        "byte\ufefforder mark inside",
        "\ufeffBOM at start",
        "mongolian\u180evowel separator",
        "thin\u2009space and hair\u200aspace and figure\u2007space",
        "vertical\x0btab and form\x0cfeed",
        "    \t    \t",
        " " * 64,
        "\n" * 40,
        "\t" * 20 + "x",
    ]
    return out


def special_tokens():
    return [
        "<|im_start|>user\nHello<|im_end|>\n",
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>",
        "text<|endoftext|>more text",
        "<|im_end|><|im_end|><|im_start|>",
        "abc<|im_end|>def",
        " <|im_start|> spaced <|im_end|> ",
        "<|im_start",
        "<|im_start|",
        "im_start|>",
        "<|IM_START|>",
        "<|<|im_start|>|>",
        "<think>\nreasoning\n</think>\n\nanswer",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "<|fim_prefix|>def f(<|fim_suffix|>):<|fim_middle|>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|object_ref_start|>obj<|object_ref_end|><|box_start|>(1,2)<|box_end|>",
        "Say <|endoftext|> literally",
        "<|im_start|>\n\n<|im_end|>",
        "<tool_response>ok</tool_response>",
        "<|repo_name|>nvfp4lm<|file_sep|>main.cpp",
    ]


def combining_non_nfc():
    return [
        "e\u0301",  # e + combining acute -> é
        "cafe\u0301",
        "A\u030a",  # Å
        "\u212b",  # ANGSTROM SIGN -> Å
        "\u2126 ohm",  # OHM SIGN -> Ω
        "\u212a kelvin",  # KELVIN SIGN -> K
        "a\u0323\u0301",  # canonical order kept
        "a\u0301\u0323",  # reordered then composed
        "o\u0308\u0304",  # ȫ
        "\u1100\u1161\u11a8",  # decomposed Hangul -> 각
        "\u1112\u1161\u11ab\u1100\u1173\u11af",  # 한글 decomposed
        "\u0915\u093c",  # Devanagari KA + NUKTA (composition exclusion: stays)
        "\u0958",  # QA -> decomposes to KA + NUKTA
        "\u0344",  # COMBINING GREEK DIALYTIKA TONOS -> two marks
        "\u0340\u0341",  # singletons
        "\u03b1\u0301\u03b9",  # Greek with combining tonos
        "Vie\u0323\u0302t Nam",  # decomposed Vietnamese
        "Tie\u0302\u0301ng Vie\u0323\u0302t",
        ">\u0338 and =\u0338 and <\u0338",  # ≯ ≠ ≮
        "\u0301 leading combining mark",
        "x\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308",  # stacked marks
        "\ufb01 ligature stays (NFC, not NFKC)",
        "\u00c5ngstr\u00f6m precomposed",
        "A\u030angstro\u0308m decomposed",
        "\u0041\u030a\u0301",  # Å + acute -> Ǻ
        "\u1e9b\u0323",  # long s with dot above + dot below
        "\u0071\u0307\u0323",  # q + dot above + dot below (no precomposed)
        "\u00e9\u0301",  # precomposed + extra mark
        "\u0627\u0653",  # Arabic ALEF + MADDA -> آ
        "\u05d1\u05bc",  # Hebrew BET + DAGESH (excluded from composition)
        "\u0b47\u0b3e",  # Oriya two-part vowel -> composes
        "\u09c7\u09be",  # Bengali two-part vowel -> composes
        "\u30ab\u3099",  # KA + combining voiced mark -> ガ
        "\uff76\uff9e",  # halfwidth KA + halfwidth voiced mark (no NFC change)
        "n\u0303o\u0301\u0301",
    ]


def unusual_valid_utf8():
    return [
        "\u00c3\u00a9 mojibake-looking text \u00e2\u0080\u0099",
        "replacement char \ufffd inside",
        "\ufffd\ufffd\ufffd",
        "\x00 NUL inside",
        "\x01\x02\x03\x7f control chars",
        "\u0080\u0085\u009f C1 controls",
        "\ud7ff last before surrogates, \ue000 first private use",
        "\uf8ff Apple logo private use",
        "\uffff\ufffe noncharacters",
        "\U0010ffff max code point",
        "\U0001d400\U0001d401\U0001d402 math bold",
        "\U0001f600\U0001f600 astral",
        "\u2060word joiner\u2060",
        "\u200d\u200c ZWJ and ZWNJ alone",
        "\u202eright-to-left override\u202c",
        "\U000e0041 tag character",
        "\u0000\u0000\u0000",
        "\u00ad soft hyphen",
        "\u034f combining grapheme joiner",
        "\U00020000\U0002a6d6\U0002b734",
    ]


def long_words():
    rng = random.Random(SEED + 2)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        "a" * 1000,
        "ab" * 700,
        "abc" * 500,
        "".join(rng.choice(letters) for _ in range(3000)),
        "".join(rng.choice(letters + letters.upper()) for _ in range(2000)),
        "Supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
        "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
        "".join(rng.choice("0123456789") for _ in range(2000)),
        " " * 1000,
        "\n" * 500,
        "😀" * 300,
        "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(2000)),
        "".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(1000)),
        "-" * 500 + "=" * 500,
        "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(2000)),
        "https://example.com/" + "/".join("segment%d" % i for i in range(200)),
        "é" * 800,
        "e\u0301" * 400,
    ]


def random_mixed(count):
    """Random concatenations of fragments from every category, with random separators."""
    rng = random.Random(SEED + 3)
    pool = []
    for fragments in (english(), contractions(), cjk(), other_scripts(), emoji(), code(), numbers(),
                      special_tokens(), combining_non_nfc(), unusual_valid_utf8()):
        pool.extend(f for f in fragments if f)
    separators = ["", " ", "  ", "\n", "\t", "\r\n", " \n", "\u3000", ",", ". "]
    out = []
    for _ in range(count):
        parts = [rng.choice(pool) for _ in range(rng.randint(2, 5))]
        text = ""
        for p in parts:
            # A random slice keeps odd boundaries (mid-word, mid-whitespace) but never splits a code point.
            start = rng.randint(0, max(0, len(p) - 1))
            end = rng.randint(start + 1, len(p))
            text += p[start:end] + rng.choice(separators)
        out.append(text)
    return out


def corpus():
    rows = []
    for category, texts in [("english", english()), ("contractions", contractions()), ("cjk", cjk()),
                            ("scripts", other_scripts()), ("emoji", emoji()), ("code", code()),
                            ("numbers", numbers()), ("whitespace", whitespace()),
                            ("special_tokens", special_tokens()), ("combining_non_nfc", combining_non_nfc()),
                            ("unusual_utf8", unusual_valid_utf8()), ("long", long_words()),
                            ("mixed", random_mixed(110))]:
        for text in texts:
            rows.append({"id": len(rows), "category": category, "text": text})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "fixtures", "tokenizer", "corpus.jsonl"))
    args = parser.parse_args()
    rows = corpus()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("wrote %d strings to %s" % (len(rows), args.out))


if __name__ == "__main__":
    main()
