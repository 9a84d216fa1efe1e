// llama.cpp beside nvfp4lm: node-llama-cpp's prebuilt CPU build (libllama + the ggml CPU backends, from npm) run on
// GGUF files, greedy, with the same prompt length and number of new tokens as `nvfp4lm bench infer`. Started by
// bench/llamacpp_reference.sh, which installs node-llama-cpp first and passes its directory in
// NVFP4LM_LLAMACPP_DIR.
//
//   run MODEL.gguf [--prompt-ids 1,2,3 | --prompt-len N] [--gen N] [--threads T]
//       One greedy generation: JSON {tokens, prefill/decode seconds and tokens/s, ...} on stdout.
//   compare --nvfp4lm EXE --model MODEL --gguf A.gguf [--gguf B.gguf ...] [--rounds R] [--prompt-len N] [--gen N]
//           [--threads T] [--nvfp4lm-args "..."]
//       R rounds; each round runs `EXE bench infer --model MODEL --json` and then llama.cpp on every GGUF, one after
//       the other (so load on a shared machine hits all of them alike). Prints the per-round numbers, the medians,
//       and the ratios nvfp4lm / llama.cpp per GGUF for prefill and decode tokens/s.
//
// Timing as nvfp4lm's: a short warm-up (8 prompt tokens, 2 new ones) first, then the prompt is evaluated in one
// batch (prefill: prompt tokens / time to the first new token) and gen - 1 more tokens are decoded one by one
// (decode: (gen - 1) / their time). Prompts of --prompt-len are random ids below min(vocabulary, 151643), the
// ordinary tokens, as nvfp4lm bench infer draws its own.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.NVFP4LM_LLAMACPP_DIR;
if (!dir) fail("NVFP4LM_LLAMACPP_DIR is not set (run bench/llamacpp_reference.sh, which installs node-llama-cpp)");
const { getLlama } = await import(pathToFileURL(path.join(dir, "node_modules/node-llama-cpp/dist/index.js")).href);

function fail(message) {
  process.stderr.write(`llamacpp_reference: ${message}\n`);
  process.exit(1);
}

function parse(argv) {
  const options = { gguf: [], rounds: 3, promptLen: 128, gen: 32, threads: 0, nvfp4lmArgs: "" };
  const positional = [];
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${flag} needs a value`);
      return argv[++i];
    };
    const integer = () => {
      const text = value();
      if (!/^[0-9]+$/.test(text)) fail(`${flag} takes a non-negative integer, got '${text}'`);
      return Number(text);
    };
    if (flag === "--prompt-ids") options.promptIds = value().split(",").map(Number);
    else if (flag === "--prompt-len") options.promptLen = integer();
    else if (flag === "--gen") options.gen = integer();
    else if (flag === "--threads") options.threads = integer();
    else if (flag === "--rounds") options.rounds = integer();
    else if (flag === "--gguf") options.gguf.push(value());
    else if (flag === "--model") options.model = value();
    else if (flag === "--nvfp4lm") options.nvfp4lm = value();
    else if (flag === "--nvfp4lm-args") options.nvfp4lmArgs = value();
    else if (flag.startsWith("--")) fail(`unknown flag ${flag}`);
    else positional.push(flag);
  }
  if (options.gen < 1) fail("--gen must be at least 1");
  return { positional, options };
}

// Deterministic random ids (a 64-bit LCG): the same prompt for every run of one length.
function randomPrompt(length, vocabulary) {
  const bound = BigInt(Math.min(vocabulary, 151643));
  let state = 0x9e3779b97f4a7c15n;
  const ids = [];
  for (let i = 0; i < length; ++i) {
    state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    ids.push(Number((state >> 33n) % bound));
  }
  return ids;
}

const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;

async function generate(sequence, prompt, gen) {
  const tokens = [];
  const start = process.hrtime.bigint();
  let firstToken = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    tokens.push(token);
    if (tokens.length === 1) firstToken = seconds(start);
    if (tokens.length === gen) break;
  }
  return { tokens, firstToken, total: seconds(start) };
}

async function runGguf(llama, file, options) {
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  try {
    const vocabulary = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length ?? 151936;
    const prompt = options.promptIds ?? randomPrompt(options.promptLen, vocabulary);
    const threads = options.threads > 0 ? options.threads : llama.cpuMathCores;
    const context = await model.createContext({
      contextSize: prompt.length + options.gen + 16,
      batchSize: Math.max(prompt.length, 8),
      threads: { ideal: threads, min: threads },
      sequences: 1,
    });
    try {
      const sequence = context.getSequence();
      await generate(sequence, prompt.slice(0, Math.min(8, prompt.length)), Math.min(3, options.gen));  // warm-up
      await sequence.clearHistory();
      const run = await generate(sequence, prompt, options.gen);
      const decodeSteps = run.tokens.length - 1;
      return {
        gguf: file,
        llama_cpp: "node-llama-cpp (prebuilt CPU backends)",
        threads,
        prompt_tokens: prompt.length,
        generated_tokens: run.tokens.length,
        tokens: run.tokens,
        prefill_seconds: run.firstToken,
        prefill_tokens_per_s: prompt.length / run.firstToken,
        decode_seconds: run.total - run.firstToken,
        decode_tokens_per_s: decodeSteps > 0 ? decodeSteps / (run.total - run.firstToken) : 0,
      };
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function runNvfp4lm(options) {
  const args = ["--log-level", "warn", "bench", "infer", "--model", options.model, "--prompt-len",
    String(options.promptLen), "--gen", String(options.gen), "--json", "-"];
  if (options.nvfp4lmArgs) args.push(...options.nvfp4lmArgs.split(/\s+/).filter(Boolean));
  const env = { ...process.env };
  if (options.threads > 0) env.OMP_NUM_THREADS = String(options.threads);
  const output = execFileSync(options.nvfp4lm, args, { encoding: "utf8", env, stdio: ["ignore", "pipe", "inherit"] });
  return JSON.parse(output);
}

async function compare(llama, options) {
  if (!options.nvfp4lm || !options.model || options.gguf.length === 0)
    fail("compare needs --nvfp4lm EXE, --model MODEL and at least one --gguf FILE");
  const rows = { nvfp4lm: [], ...Object.fromEntries(options.gguf.map((g) => [g, []])) };
  for (let round = 1; round <= options.rounds; ++round) {
    const ours = runNvfp4lm(options);
    rows.nvfp4lm.push(ours);
    process.stderr.write(`round ${round}: nvfp4lm prefill ${ours.prefill_tokens_per_s.toFixed(1)} tok/s, decode ` +
      `${ours.decode_tokens_per_s.toFixed(2)} tok/s\n`);
    for (const file of options.gguf) {
      const theirs = await runGguf(llama, file, options);
      rows[file].push(theirs);
      process.stderr.write(`round ${round}: llama.cpp ${path.basename(file)} prefill ` +
        `${theirs.prefill_tokens_per_s.toFixed(1)} tok/s, decode ${theirs.decode_tokens_per_s.toFixed(2)} tok/s\n`);
    }
  }
  const summary = (list) => ({
    prefill_tokens_per_s: median(list.map((r) => r.prefill_tokens_per_s)),
    decode_tokens_per_s: median(list.map((r) => r.decode_tokens_per_s)),
  });
  const ours = summary(rows.nvfp4lm);
  const result = { rounds: options.rounds, prompt_tokens: options.promptLen, generated_tokens: options.gen,
    nvfp4lm: { model: options.model, ...ours, runs: rows.nvfp4lm }, llama_cpp: [] };
  let table = `medians of ${options.rounds} alternating rounds, ${options.promptLen}-token prompt, ${options.gen} ` +
    `new tokens\n${"".padEnd(36)} ${"prefill tok/s".padStart(14)} ${"decode tok/s".padStart(13)} ` +
    `${"nvfp4lm/this prefill".padStart(21)} ${"decode".padStart(7)}\n`;
  table += `${"nvfp4lm " + path.basename(options.model)}`.padEnd(36) +
    ` ${ours.prefill_tokens_per_s.toFixed(1).padStart(14)} ${ours.decode_tokens_per_s.toFixed(2).padStart(13)}\n`;
  for (const file of options.gguf) {
    const theirs = summary(rows[file]);
    const ratios = { prefill: ours.prefill_tokens_per_s / theirs.prefill_tokens_per_s,
      decode: ours.decode_tokens_per_s / theirs.decode_tokens_per_s };
    result.llama_cpp.push({ gguf: file, ...theirs, nvfp4lm_over_llama_cpp: ratios, runs: rows[file] });
    table += `${"llama.cpp " + path.basename(file)}`.padEnd(36) +
      ` ${theirs.prefill_tokens_per_s.toFixed(1).padStart(14)} ${theirs.decode_tokens_per_s.toFixed(2).padStart(13)}` +
      ` ${ratios.prefill.toFixed(2).padStart(21)} ${ratios.decode.toFixed(2).padStart(7)}\n`;
  }
  process.stderr.write(table);
  process.stdout.write(JSON.stringify(result, null, 1) + "\n");
}

const { positional, options } = parse(process.argv.slice(2));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error",
  maxThreads: options.threads > 0 ? options.threads : undefined });
if (positional[0] === "run" && positional.length === 2) {
  process.stdout.write(JSON.stringify(await runGguf(llama, positional[1], options)) + "\n");
} else if (positional[0] === "compare" && positional.length === 1) {
  await compare(llama, options);
} else {
  fail("usage: run MODEL.gguf [--prompt-ids ...|--prompt-len N] [--gen N] [--threads T] | compare --nvfp4lm EXE " +
    "--model MODEL --gguf FILE... [--rounds R] [--prompt-len N] [--gen N] [--threads T]");
}
await llama.dispose();
