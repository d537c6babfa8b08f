// POST /v1/responses through the openai SDK's client.responses.create, on the tiny Qwen2
// model (real tokenizer and template, random weights): the answer must be what the chat
// endpoint says for the same conversation, streamed as typed events the SDK accepts; forced
// function calls and text.format come back as Responses items. The request rewriting and the
// event order are tested in C (tests/test_server_responses.c).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './lib/server.mjs';

let srv, client;
const NAME = 'qwen-tiny';

before(async () => {
  srv = await startServer('qwen2-tiny-random', ['--served-model-name', NAME]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
});

test('responses.create answers what chat.completions answers, whole and streamed', async () => {
  const chat = await client.chat.completions.create({
    model: NAME, max_tokens: 10, temperature: 0,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
  });
  const want = chat.choices[0].message.content;
  const r = await client.responses.create({ model: NAME, instructions: 'Be brief.', input: 'Hello', max_output_tokens: 10, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output_text, want); // the SDK's own join of the output_text parts
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(r.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
  assert.equal(r.store, false);

  const stream = await client.responses.create({
    model: NAME, instructions: 'Be brief.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hello' }] }],
    max_output_tokens: 10, temperature: 0, stream: true,
  });
  const types = [];
  let text = '', done = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  assert.equal(text, want);
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  assert.equal(done.output[0].content[0].text, want);
});

test('a forced function call is a function_call item; its output goes back as input', async () => {
  const tools = [{ type: 'function', name: 'get_weather', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'], additionalProperties: false } }];
  const r = await client.responses.create({ model: NAME, input: 'Weather?', tools, tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 200, temperature: 1, seed: 7 });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  // the next turn: the call and its output as items
  const next = await client.responses.create({ model: NAME, tools, max_output_tokens: 4, input: [
    { role: 'user', content: 'Weather?' }, call, { type: 'function_call_output', call_id: call.call_id, output: '21 C' }] });
  assert.equal(next.output[0].type, 'message');
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
});

test('text.format json_schema, and the 400s', async () => {
  const r = await client.responses.create({ model: NAME, input: 'A city?', max_output_tokens: 60, seed: 3,
    text: { format: { type: 'json_schema', name: 'c', strict: true,
      schema: { type: 'object', properties: { city: { type: 'string', maxLength: 6 } }, required: ['city'], additionalProperties: false } } } });
  assert.equal(typeof JSON.parse(r.output_text).city, 'string');
  await assert.rejects(client.responses.create({ model: NAME, input: 'x', previous_response_id: 'resp_1' }),
    (e) => e.status === 400 && e.param === 'previous_response_id');
  await assert.rejects(client.responses.create({ model: NAME, input: 'x', tools: [{ type: 'web_search_preview' }] }),
    (e) => e.status === 400 && e.param === 'tools');
  await assert.rejects(client.responses.create({ model: 'nope', input: 'x' }), (e) => e.status === 404);
});
