// The official `openai` npm client asking `nvfp4lm serve` for structured answers (run by
// tests/serve/test_openai_structured.cpp, which starts the server on the tiny random model and names the spec file in
// NVFP4LM_TEST_SPEC: NVFP4LM_BASE_URL, NVFP4LM_MODEL, NVFP4LM_REQUESTS, NVFP4LM_MAX_TOKENS).
// A random model at temperature 1 is the hardest writer there is: every answer must still parse and validate against
// the schema (checked by the small validator below, for the keywords the schema uses), streamed or not, within
// max_tokens; json_object answers must be objects; an unsupported keyword is a 400 naming it.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const env = JSON.parse(readFileSync(process.env.NVFP4LM_TEST_SPEC, 'utf8'));
const client = new OpenAI({ apiKey: 'unused', baseURL: env.NVFP4LM_BASE_URL, maxRetries: 0 });
const maxTokens = Number(env.NVFP4LM_MAX_TOKENS);

function check(condition, what, detail) {
  if (!condition) {
    console.error(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
}

const schema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 10 },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    budget: { type: ['number', 'null'] },
    mood: { enum: ['calm', 'busy', 42] },
    stops: { type: 'array', items: { $ref: '#/$defs/stop' }, maxItems: 2 },
  },
  required: ['city', 'days', 'budget', 'mood', 'stops'],
  additionalProperties: false,
  $defs: {
    stop: {
      type: 'object',
      properties: { name: { type: 'string' }, night: { type: 'boolean' } },
      required: ['name'],
      additionalProperties: false,
    },
  },
};

// Errors of `value` against `node` (the keywords the schema above uses), as paths.
function validate(value, node, path = '$') {
  if (node.$ref) return validate(value, schema.$defs[node.$ref.split('/').pop()], path);
  const errors = [];
  if (node.enum && !node.enum.some((option) => option === value)) errors.push(`${path}: not in enum`);
  const types = node.type === undefined ? [] : [].concat(node.type);
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);
  if (types.length && !types.some((t) => t === typeOf(value) || (t === 'number' && typeOf(value) === 'integer')))
    return [`${path}: type ${typeOf(value)}, expected ${types}`];
  if (typeof value === 'string' && node.maxLength !== undefined && [...value].length > node.maxLength)
    errors.push(`${path}: longer than ${node.maxLength}`);
  if (typeof value === 'number') {
    if (node.minimum !== undefined && value < node.minimum) errors.push(`${path}: below ${node.minimum}`);
    if (node.maximum !== undefined && value > node.maximum) errors.push(`${path}: above ${node.maximum}`);
  }
  if (Array.isArray(value)) {
    if (node.maxItems !== undefined && value.length > node.maxItems) errors.push(`${path}: more than ${node.maxItems}`);
    value.forEach((item, i) => errors.push(...validate(item, node.items ?? {}, `${path}[${i}]`)));
  }
  if (typeOf(value) === 'object' && node.properties) {
    for (const key of node.required ?? []) if (!(key in value)) errors.push(`${path}: missing ${key}`);
    for (const [key, item] of Object.entries(value)) {
      if (node.properties[key]) errors.push(...validate(item, node.properties[key], `${path}.${key}`));
      else if (node.additionalProperties === false) errors.push(`${path}: extra ${key}`);
    }
  }
  return errors;
}

const messages = [{ role: 'user', content: 'Plan a short trip and answer in JSON.' }];
const responseFormat = { type: 'json_schema', json_schema: { name: 'trip', strict: true, schema } };
const requests = Number(env.NVFP4LM_REQUESTS);
const answers = await Promise.all(Array.from({ length: requests }, (_, i) => client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, temperature: 1, top_p: 1, max_tokens: maxTokens, seed: i,
  response_format: responseFormat,
})));
answers.forEach((answer, i) => {
  const text = answer.choices[0].message.content;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    check(false, `answer ${i} parses`, { text, error: String(error) });
  }
  const errors = validate(value, schema);
  check(errors.length === 0, `answer ${i} validates`, { text, errors });
  check(answer.choices[0].finish_reason === 'stop' && answer.usage.completion_tokens <= maxTokens,
    `answer ${i} ends by itself within max_tokens`, answer);
});
console.log(`ok ${requests} json_schema answers at temperature 1 parse and validate`);

const stream = await client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, temperature: 1, max_tokens: maxTokens, seed: 7, stream: true,
  response_format: responseFormat,
});
let streamed = '';
for await (const chunk of stream) for (const choice of chunk.choices) streamed += choice.delta?.content ?? '';
check(validate(JSON.parse(streamed), schema).length === 0, 'a streamed answer validates', streamed);
console.log('ok streamed json_schema answer');

const objects = await Promise.all([1, 2, 3, 4].map((seed) => client.chat.completions.create({
  model: env.NVFP4LM_MODEL, messages, temperature: 1, max_tokens: 24, seed, response_format: { type: 'json_object' },
})));
for (const answer of objects) {
  const value = JSON.parse(answer.choices[0].message.content);
  check(typeof value === 'object' && value !== null && !Array.isArray(value), 'json_object answer is an object',
    answer.choices[0].message.content);
}
console.log('ok json_object answers');

try {
  await client.chat.completions.create({
    model: env.NVFP4LM_MODEL, messages, max_tokens: maxTokens,
    response_format: { type: 'json_schema', json_schema: { name: 'zip', schema: { type: 'string', pattern: '^[0-9]+$' } } },
  });
  check(false, 'an unsupported keyword is refused', 'accepted');
} catch (error) {
  check(error.status === 400 && error.message.includes("'pattern'") &&
    error.param === 'response_format.json_schema.schema', 'an unsupported keyword is a 400 naming it', error.message);
}
console.log('ok unsupported keyword refused');
