// The official `openai` npm client calls tools of a model fine-tuned to call one (run by
// tests/serve/test_openai_tools.cpp, which trains the model, starts the server, installs the client and writes what to
// expect to the JSON file named by NVFP4LM_TEST_SPEC):
//   NVFP4LM_BASE_URL   http://127.0.0.1:PORT/v1
//   NVFP4LM_MODEL      the served model name
//   NVFP4LM_TOOLS      the tools of the training record; NVFP4LM_QUESTION its user message
//   NVFP4LM_CALL       the trained call {name, arguments (JSON text as the template renders it)}
//   NVFP4LM_RESULT     the tool's result; NVFP4LM_ANSWER the trained final answer
// Greedy: the tool call (non-stream and stream, finish_reason "tool_calls"), then the round trip (the assistant message
// as returned plus the tool result) to the final answer; tool_choice required / none / an unknown name. Prints one line
// per check and exits 1 at the first failure.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const env = JSON.parse(readFileSync(process.env.NVFP4LM_TEST_SPEC, 'utf8'));
const client = new OpenAI({ apiKey: 'unused', baseURL: env.NVFP4LM_BASE_URL, maxRetries: 0 });
const model = env.NVFP4LM_MODEL;
const tools = env.NVFP4LM_TOOLS;
const expected = env.NVFP4LM_CALL;

function check(condition, what, detail) {
  if (!condition) {
    console.error(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

const messages = [{ role: 'user', content: env.NVFP4LM_QUESTION }];
const ask = { model, messages, tools, temperature: 0, max_tokens: 64 };

const chat = await client.chat.completions.create(ask);
const message = chat.choices[0].message;
const call = message.tool_calls?.[0];
check(chat.choices[0].finish_reason === 'tool_calls' && message.content === null && message.tool_calls.length === 1,
  'a tool call, finish_reason tool_calls, content null', chat.choices[0]);
check(call.type === 'function' && /^call_[A-Za-z0-9]{24}$/.test(call.id) && call.function.name === expected.name &&
  call.function.arguments === expected.arguments, 'the trained call, arguments as the model wrote them', call);

const stream = await client.chat.completions.create({ ...ask, stream: true });
const calls = [];
let content = '';
let finish = null;
for await (const chunk of stream) {
  for (const choice of chunk.choices) {
    content += choice.delta?.content ?? '';
    for (const part of choice.delta?.tool_calls ?? []) {
      calls[part.index] ??= { id: '', name: '', arguments: '' };
      calls[part.index].id += part.id ?? '';
      calls[part.index].name += part.function?.name ?? '';
      calls[part.index].arguments += part.function?.arguments ?? '';
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check(finish === 'tool_calls' && content === '' && calls.length === 1 && calls[0].name === expected.name &&
  calls[0].arguments === expected.arguments && calls[0].id.startsWith('call_'), 'streamed tool call',
  { finish, content, calls });

const roundTrip = await client.chat.completions.create({
  ...ask,
  messages: [...messages, message, { role: 'tool', tool_call_id: call.id, content: env.NVFP4LM_RESULT }],
});
check(roundTrip.choices[0].message.content === env.NVFP4LM_ANSWER && roundTrip.choices[0].finish_reason === 'stop' &&
  !roundTrip.choices[0].message.tool_calls, 'the tool result gives the trained answer', roundTrip.choices[0]);

const required = await client.chat.completions.create({
  ...ask, messages: [{ role: 'user', content: 'Something else entirely' }], tool_choice: 'required', max_tokens: 256,
});
check(required.choices[0].message.tool_calls?.length === 1 &&
  required.choices[0].message.tool_calls[0].function.name === expected.name &&
  typeof JSON.parse(required.choices[0].message.tool_calls[0].function.arguments).city === 'string',
  'tool_choice required forces a call that fits the parameters', required.choices[0]);

const none = await client.chat.completions.create({ ...ask, tool_choice: 'none' });
check(!none.choices[0].message.tool_calls && none.choices[0].finish_reason !== 'tool_calls',
  'tool_choice none never returns tool_calls', none.choices[0]);

try {
  await client.chat.completions.create({ ...ask, tool_choice: { type: 'function', function: { name: 'nope' } } });
  check(false, 'unknown tool_choice name -> 400', 'no error');
} catch (error) {
  check(error instanceof OpenAI.BadRequestError && error.param === 'tool_choice.function.name',
    'unknown tool_choice name -> 400', { status: error.status, param: error.param });
}
console.log('all openai tool checks passed');
