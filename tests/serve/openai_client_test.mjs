// The official `openai` npm client against `nvfp4lm serve` (run by tests/serve/test_openai_client.cpp, which starts
// the server, installs the client into the build directory and writes what to expect to the JSON file named by
// NVFP4LM_TEST_SPEC):
//   NVFP4LM_BASE_URL        http://127.0.0.1:PORT/v1
//   NVFP4LM_API_KEY         the server's --api-key
//   NVFP4LM_MODEL           the served model name
//   NVFP4LM_QUESTION        a user message; NVFP4LM_CHAT_EXPECTED: `generate --temperature 0` 's answer to it
//   NVFP4LM_RAW_PROMPT      a text prompt; NVFP4LM_RAW_EXPECTED: `generate --raw --temperature 0` 's continuation
//   NVFP4LM_MAX_TOKENS      max tokens of both
// Checks chat, streaming chat, completions, logprobs and invalid requests (400, 404, 401); prints one line per
// check and exits 1 at the first failure.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const env = JSON.parse(readFileSync(process.env.NVFP4LM_TEST_SPEC, 'utf8'));
const maxTokens = Number(env.NVFP4LM_MAX_TOKENS);
const client = new OpenAI({ apiKey: env.NVFP4LM_API_KEY, baseURL: env.NVFP4LM_BASE_URL, maxRetries: 0 });

function check(condition, what, detail) {
  if (!condition) {
    console.error(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === env.NVFP4LM_MODEL, 'models.list', models.data);

const messages = [{ role: 'user', content: env.NVFP4LM_QUESTION }];
const chat = await client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, max_tokens: maxTokens, temperature: 0,
});
check(chat.choices[0].message.content === env.NVFP4LM_CHAT_EXPECTED, 'chat equals generate --temperature 0',
  { got: chat.choices[0].message.content, expected: env.NVFP4LM_CHAT_EXPECTED });
check(chat.object === 'chat.completion' && chat.usage.total_tokens === chat.usage.prompt_tokens +
  chat.usage.completion_tokens && ['stop', 'length'].includes(chat.choices[0].finish_reason), 'chat fields', chat);

const stream = await client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, max_completion_tokens: maxTokens, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let streamed = '';
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check(streamed === env.NVFP4LM_CHAT_EXPECTED, 'streaming chat equals the same answer', { streamed });
check(finish === chat.choices[0].finish_reason && usage?.completion_tokens === chat.usage.completion_tokens,
  'streaming chat finish_reason and usage', { finish, usage });

const completion = await client.completions.create({
  model: env.NVFP4LM_MODEL, prompt: env.NVFP4LM_RAW_PROMPT, max_tokens: maxTokens, temperature: 0,
});
check(completion.choices[0].text === env.NVFP4LM_RAW_EXPECTED, 'completion equals generate --raw --temperature 0',
  { got: completion.choices[0].text, expected: env.NVFP4LM_RAW_EXPECTED });

const withLogprobs = await client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3,
});
const content = withLogprobs.choices[0].logprobs.content;
check(content.length === withLogprobs.usage.completion_tokens &&
  content.every((entry) => entry.logprob <= 0 && entry.top_logprobs.length === 3 &&
    entry.top_logprobs[0].token === entry.token && Array.isArray(entry.bytes)), 'chat logprobs', content);
const legacy = await client.completions.create({
  model: env.NVFP4LM_MODEL, prompt: env.NVFP4LM_RAW_PROMPT, max_tokens: 3, temperature: 0, logprobs: 2,
});
check(legacy.choices[0].logprobs.token_logprobs.length === 3 && legacy.choices[0].logprobs.top_logprobs.length === 3,
  'completion logprobs', legacy.choices[0].logprobs);

async function expectError(promise, status, what) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof OpenAI.APIError && error.status === status && typeof error.message === 'string',
      what, { status: error.status, message: error.message });
    return;
  }
  check(false, what, 'no error');
}
await expectError(client.chat.completions.create({ model: env.NVFP4LM_MODEL, messages, temperature: 7 }), 400,
  'invalid temperature -> BadRequestError');
await expectError(client.chat.completions.create({ model: env.NVFP4LM_MODEL, messages: [] }), 400,
  'empty messages -> BadRequestError');
await expectError(client.chat.completions.create({ model: 'no-such-model', messages }), 404,
  'unknown model -> NotFoundError');
const stranger = new OpenAI({ apiKey: 'wrong-key', baseURL: env.NVFP4LM_BASE_URL, maxRetries: 0 });
await expectError(stranger.models.list(), 401, 'bad API key -> AuthenticationError');
console.log('all openai client checks passed');
