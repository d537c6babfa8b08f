// Structured outputs through the openai SDK's parse helpers (chat.completions.parse) on the
// tiny Qwen2 model: random weights, so whatever the answer is must come from the grammar.
// The schemas bound every string and array so it always finishes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction, zodTextFormat } from 'openai/helpers/zod';
import { startServer } from './lib/server.mjs';
import { personSchema as person, personZod, checkPerson } from './lib/person.mjs';

let srv, client;
const NAME = 'qwen-tiny';
const base = { model: NAME, messages: [{ role: 'user', content: 'Who?' }], max_tokens: 300, temperature: 1, seed: 11 };

before(async () => {
  srv = await startServer('qwen2-tiny-random', ['--served-model-name', NAME]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => assert.equal((await srv.stop()).code, 0));

test('chat.completions.parse with a strict json_schema gives a parsed object', async () => {
  const r = await client.chat.completions.parse({
    ...base, response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
  });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop');
  checkPerson(msg.parsed);
  assert.deepEqual(msg.parsed, JSON.parse(msg.content));
});

test('streamed json_schema answers are the same kind of object', async () => {
  const stream = await client.chat.completions.create({
    ...base, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  checkPerson(JSON.parse(text));
});

test('a named strict function: parse() reads the arguments the grammar held to its schema', async () => {
  const tools = [{ type: 'function', function: { name: 'lookup', strict: true, parameters: person } }];
  const r = await client.chat.completions.parse({
    ...base, tools, tool_choice: { type: 'function', function: { name: 'lookup' } },
  });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'lookup');
  checkPerson(call.function.parsed_arguments);
});

test('the zod helpers: zodResponseFormat, zodFunction and zodTextFormat parse what the grammar held', async () => {
  const r = await client.chat.completions.parse({ ...base, seed: 12, response_format: zodResponseFormat(personZod, 'person') });
  checkPerson(r.choices[0].message.parsed);
  const t = await client.chat.completions.parse({
    ...base, seed: 13, tools: [zodFunction({ name: 'lookup', parameters: personZod })],
    tool_choice: { type: 'function', function: { name: 'lookup' } },
  });
  checkPerson(t.choices[0].message.tool_calls[0].function.parsed_arguments);
  // /v1/responses takes no seed: greedy, and room for the schema's longest answer
  const o = await client.responses.parse({
    model: NAME, input: 'Who?', max_output_tokens: 600, temperature: 0, text: { format: zodTextFormat(personZod, 'person') },
  });
  checkPerson(o.output_parsed);
});

test('structured_outputs and guided_choice as vLLM reads them; refusals name the keyword', async () => {
  const r = await client.chat.completions.create({ ...base, structured_outputs: { choice: ['yes', 'no'] } });
  assert.ok(['yes', 'no'].includes(r.choices[0].message.content));
  const c = await client.completions.create({ model: NAME, prompt: 'Q', max_tokens: 20, guided_regex: '[0-9]{3}-[a-z]{2}' });
  assert.match(c.choices[0].text, /^[0-9]{3}-[a-z]{2}$/);
  await assert.rejects(client.chat.completions.create({
    ...base, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: {} } } },
  }), (e) => e.status === 400 && e.param === 'response_format' && /patternProperties/.test(e.message));
});
