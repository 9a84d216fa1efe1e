// Renders chat templates with @huggingface/jinja (the reference of tests/tokenizer/test_jinja_reference.cpp).
// stdin: JSON lines {"template": "...", "context": {...}}; stdout: one line per input, {"text": "..."} or
// {"error": "..."}.
import { Template } from "@huggingface/jinja";
import * as readline from "node:readline";

const compiled = new Map();  // the corpus renders few templates many times
for await (const line of readline.createInterface({ input: process.stdin })) {
  const row = JSON.parse(line);
  let out;
  try {
    if (!compiled.has(row.template)) compiled.set(row.template, new Template(row.template));
    out = { text: compiled.get(row.template).render(row.context) };
  } catch (error) {
    out = { error: String(error?.message ?? error) };
  }
  console.log(JSON.stringify(out));
}
