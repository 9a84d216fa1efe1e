#!/usr/bin/env python3
"""Reference renderings of published chat templates (issue 48), by Python's jinja2 configured as Hugging Face
transformers' apply_chat_template configures it (transformers/utils/chat_template_utils.py, _compile_jinja_template
and render_jinja_template, 4.5x / 5.x):

  - jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[AssistantTracker, jinja2.ext.loopcontrols]); AssistantTracker's {% generation %} block renders its
    body unchanged when no assistant mask is asked for;
  - filters: tojson = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys);
  - globals: raise_exception (TemplateError), strftime_now (datetime.now().strftime; here SOURCE_DATE_EPOCH in UTC
    when set, as nvfp4lm does, so the fixture does not depend on the day it was made);
  - render(messages=..., tools=None or the list, documents=None, add_generation_prompt=..., **special_tokens_map,
    **kwargs).

    SOURCE_DATE_EPOCH=1780000000 python3 tests/reference/make_chat_template_fixtures.py \\
        --templates tests/fixtures/chat-templates --out tests/fixtures/tokenizer/chat_template_cases.jsonl

Writes a first line {"meta": {...}}, then one line per template x conversation x add_generation_prompt:
{"template": file name, "conversation": name, "add_generation_prompt": bool} and either {"text"} or {"error"}
(jinja2's message: the template raised or failed). The conversations are below (CONVERSATIONS): each has messages
and optionally tools, as a user of transformers passes them. Needs only jinja2 (Debian's python3-jinja2 3.1.x).
"""
import argparse
import datetime
import json
import os
import pathlib

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL_TOKENS = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "unk_token": "<|unk|>", "pad_token": "<|pad|>"}
KWARGS = {"date_string": "06 Dec 2026"}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather and a forecast for a place.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "options": {
                    "type": "object",
                    "properties": {"days": {"type": "integer", "minimum": 1}, "hourly": {"type": "boolean"}},
                },
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    "simple": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_multi_turn": {"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"}]},
    "tool_call": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("call_1", "get_weather", {"location": "Paris, France", "unit": "celsius",
                                                       "options": {"days": 3, "hourly": False}})]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21.5}"},
        {"role": "assistant", "content": "It is 21.5 °C in Paris."}]},
    "tool_call_openai_form": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("abcDEF123", "get_weather", "{\"location\": \"Rome\", \"unit\": \"celsius\"}")]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "18 C and sunny"},
        {"role": "assistant", "content": "18 °C, sunny."},
        {"role": "user", "content": "Thanks!"}]},
    "parallel_calls": {"tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Oslo and news about it?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("a1", "get_weather", {"location": "Oslo", "tags": ["now", "wind"]}),
                        call("a2", "search", {"query": "Oslo news"})]},
        {"role": "tool", "tool_call_id": "a1", "name": "get_weather", "content": "-3 C"},
        {"role": "tool", "tool_call_id": "a2", "name": "search", "content": "Nothing new."}]},
    "agent_loop": {"tools": [SEARCH_TOOL], "messages": [
        {"role": "user", "content": "Find the tallest tower, then its height."},
        {"role": "assistant", "content": "", "reasoning_content": "I should search first.",
         "tool_calls": [call("s1", "search", {"query": "tallest tower"})]},
        {"role": "tool", "tool_call_id": "s1", "name": "search", "content": "Burj Khalifa"},
        {"role": "assistant", "content": "", "reasoning_content": "Now the height.",
         "tool_calls": [call("s2", "search", {"query": "Burj Khalifa height"})]},
        {"role": "tool", "tool_call_id": "s2", "name": "search", "content": "828 m"},
        {"role": "assistant", "content": "The Burj Khalifa, 828 m.", "reasoning_content": "Done."}]},
    "reasoning": {"messages": [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "17 has no divisor below its root."},
        {"role": "user", "content": "And 21?"}]},
    "think_in_content": {"messages": [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "<think>\nEasy one.\n</think>\n\nParis."},
        {"role": "user", "content": "Of Italy?"}]},
    "null_content": {"tools": [SEARCH_TOOL], "messages": [
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": None, "tool_calls": [call("n1", "search", {"query": "it"})]},
        {"role": "tool", "tool_call_id": "n1", "name": "search", "content": "found"}]},
    "big_integers": {"tools": [SEARCH_TOOL], "messages": [
        {"role": "user", "content": "Order 12345678901234567890."},
        {"role": "assistant", "content": "",
         "tool_calls": [call("b1", "search", {"query": "order", "id": 12345678901234567890, "n": -9223372036854775808})]},
        {"role": "tool", "tool_call_id": "b1", "name": "search", "content": "shipped"}]},
    "unicode": {"messages": [
        {"role": "system", "content": "Réponds en français. 日本語も可。"},
        {"role": "user", "content": "Grüße 🌍 \"quoted\" \\ back\u2028line"},
        {"role": "assistant", "content": "¡Hola! ☺\ttab"}]},
    "empty_contents": {"messages": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": " "}]},
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = (datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc) if epoch
           else datetime.datetime.now())
    return now.strftime(format)


class AssistantTracker(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: the body, rendered as is (no mask asked)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--templates", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    env = environment()
    rows = [{"meta": {"source": "jinja2", "jinja2_version": jinja2.__version__,
                      "source_date_epoch": os.environ.get("SOURCE_DATE_EPOCH"), "special_tokens": SPECIAL_TOKENS,
                      "kwargs": KWARGS, "conversations": CONVERSATIONS}}]
    for path in sorted(pathlib.Path(args.templates).glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        try:
            template = env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            template, compile_error = None, f"{type(e).__name__}: {e}"
        for name, conversation in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                row = {"template": path.name, "conversation": name, "add_generation_prompt": add_generation_prompt}
                if template is None:
                    row["error"] = compile_error
                else:
                    try:
                        row["text"] = template.render(messages=conversation["messages"],
                                                      tools=conversation.get("tools"), documents=None,
                                                      add_generation_prompt=add_generation_prompt,
                                                      **SPECIAL_TOKENS, **KWARGS)
                    except Exception as e:  # the template raised (raise_exception) or failed (a type error)
                        row["error"] = f"{type(e).__name__}: {e}"
                rows.append(row)
    with open(args.out, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
