// vLLM's output parsers through the openai SDK: `--enable-auto-tool-choice --tool-call-parser
// hermes --reasoning-parser deepseek_r1` on the tiny Qwen2 model (real tokenizer and template,
// random weights, so it writes no tool call and no </think>: under deepseek_r1 the whole
// answer is reasoning). The parsers themselves are tested in C (tests/test_server_tools.c,
// tests/test_server_reasoning.c); here the SDK must accept what the server sends.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction, zodTextFormat } from 'openai/helpers/zod';
import { startServer } from './lib/server.mjs';
import { personZod, checkPerson } from './lib/person.mjs';

let srv, plain, client, plainClient;
const NAME = 'qwen-tiny';
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const body = { model: NAME, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'auto', max_tokens: 8, temperature: 0, ignore_eos: true };

before(async () => {
  [srv, plain] = await Promise.all([
    startServer('qwen2-tiny-random', ['--served-model-name', NAME, '--enable-auto-tool-choice',
      '--tool-call-parser', 'hermes', '--reasoning-parser', 'deepseek_r1']),
    startServer('qwen2-tiny-random', ['--served-model-name', NAME]),
  ]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
  plainClient = new OpenAI({ baseURL: plain.base + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await plain.stop()).code, 0);
});

test('reasoning_content comes back whole and streamed, the same text', async () => {
  const r = await client.chat.completions.create(body);
  const msg = r.choices[0].message;
  assert.equal(typeof msg.reasoning_content, 'string');
  assert.ok(msg.reasoning_content.length > 0);
  assert.equal(msg.content, null);
  assert.equal(msg.tool_calls, undefined);
  assert.equal(r.choices[0].finish_reason, 'length');

  const stream = await client.chat.completions.create({ ...body, stream: true });
  let reasoning = '', content = '', finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    reasoning += c.delta.reasoning_content ?? '';
    content += c.delta.content ?? '';
    assert.equal(c.delta.tool_calls, undefined);
    finish = c.finish_reason ?? finish;
  }
  assert.equal(reasoning, msg.reasoning_content);
  assert.equal(content, '');
  assert.equal(finish, 'length');
});

test('tool_choice is checked as vLLM checks it', async () => {
  const bad = async (c, extra, re) => assert.rejects(c.chat.completions.create({ ...body, ...extra }),
    (e) => e.status === 400 && e.param === 'tool_choice' && re.test(e.message));
  await bad(client, { tool_choice: { type: 'function', function: { name: 'get_time' } } }, /has not been passed/);
  await bad(client, { tools: undefined }, /`tools` must be set/);
  await bad(plainClient, {}, /--enable-auto-tool-choice/);
  // no parser flags: tools are still rendered and the answer is plain content
  const r = await plainClient.chat.completions.create({ ...body, tool_choice: undefined });
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].message.reasoning_content, undefined);
});

test('response_format json_object: the answer is one JSON object, streamed or not', async () => {
  const req = { model: NAME, messages: [{ role: 'user', content: 'Describe Paris as JSON.' }],
    response_format: { type: 'json_object' }, max_tokens: 64, temperature: 0 };
  const r = await plainClient.chat.completions.create(req);
  const text = r.choices[0].message.content;
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object', text);
  else assert.match(text, /^\s*\{/);
  const stream = await plainClient.chat.completions.create({ ...req, stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, text);
});

// The grammar holds a guided answer from its first token, so there is no thought in it: under
// deepseek_r1 (all reasoning until a </think>) it must still come back as content and calls.
test('with a reasoning parser, structured outputs and forced calls are content, parsed', async () => {
  const req = { model: NAME, messages: [{ role: 'user', content: 'Who?' }], max_tokens: 300, temperature: 1, seed: 3 };
  const r = await client.chat.completions.parse({ ...req, response_format: zodResponseFormat(personZod, 'person') });
  checkPerson(r.choices[0].message.parsed);
  assert.equal(r.choices[0].message.reasoning_content, undefined);
  const stream = await client.chat.completions.create({ ...req, stream: true, response_format: zodResponseFormat(personZod, 'person') });
  let text = '';
  for await (const chunk of stream) {
    assert.equal(chunk.choices[0]?.delta?.reasoning_content, undefined);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, r.choices[0].message.content);
  const t = await client.chat.completions.parse({
    ...req, tools: [zodFunction({ name: 'lookup', parameters: personZod })], tool_choice: { type: 'function', function: { name: 'lookup' } },
  });
  checkPerson(t.choices[0].message.tool_calls[0].function.parsed_arguments);
  const o = await client.responses.parse({
    model: NAME, input: 'Who?', max_output_tokens: 600, temperature: 0, text: { format: zodTextFormat(personZod, 'person') },
  });
  checkPerson(o.output_parsed);
  assert.deepEqual(o.output.map((i) => i.type), ['message']);
});
