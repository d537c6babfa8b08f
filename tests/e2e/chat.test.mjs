// /v1/chat/completions with the tiny Qwen2 model (real Qwen2.5 tokenizer and chat template,
// random weights): the template as transformers renders it, SSE chunks as OpenAI sends them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, http, curl, dataDir } from './lib/server.mjs';

let srv, stories, client;
const NAME = 'qwen-tiny';
const vectors = JSON.parse(fs.readFileSync(path.join(dataDir, 'chat-templates', 'rendered_vectors.json'), 'utf8'))['qwen2.5'];
const hello = [{ role: 'user', content: 'Hello!' }];

before(async () => {
  [srv, stories] = await Promise.all([
    startServer('qwen2-tiny-random', ['--served-model-name', NAME, '--max-model-len', '1024']),
    startServer('stories260K', ['--served-model-name', 'stories']),
  ]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await stories.stop()).code, 0);
});

test('the rendered prompt has exactly the token ids transformers gives, tools included', async () => {
  for (const v of vectors) {
    const body = { model: NAME, messages: v.messages, add_generation_prompt: v.add_generation_prompt };
    if (v.tools) body.tools = v.tools;
    const r = await http(srv, 'POST', '/tokenize', { body });
    assert.equal(r.status, 200, `${v.case}: ${r.text}`);
    assert.deepEqual(r.json.tokens, v.expected_token_ids, v.case);
    const chat = await client.chat.completions.create({ ...body, max_tokens: 2, temperature: 0 });
    assert.equal(chat.usage.prompt_tokens, v.expected_token_ids.length, v.case);
  }
});

test('non-streamed chat completion has the OpenAI shape', async () => {
  const r = await client.chat.completions.create({ model: NAME, messages: hello, max_tokens: 12, temperature: 0 });
  assert.match(r.id, /^chatcmpl-[0-9a-f]+$/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, NAME);
  assert.equal(typeof r.created, 'number');
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['length', 'stop'].includes(c.finish_reason));
  assert.equal(r.usage.prompt_tokens, vectors[0].expected_token_ids.length);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('the same conversation twice reuses cached prefix blocks', async () => {
  const long = [{ role: 'system', content: 'You are a careful assistant. '.repeat(12) }, ...hello];
  await client.chat.completions.create({ model: NAME, messages: long, max_tokens: 2, temperature: 0 });
  const r = await client.chat.completions.create({ model: NAME, messages: long, max_tokens: 2, temperature: 0 });
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 16, JSON.stringify(r.usage));
});

test('streamed chat: role chunk first, finish_reason in the last content chunk, usage, [DONE]', async () => {
  const params = { model: NAME, messages: hello, max_tokens: 10, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  assert.equal(chunks[0].choices[0].finish_reason, null);
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 10);
  const content = chunks.slice(1, -1);
  assert.equal(content.at(-1).choices[0].finish_reason, 'length');
  for (const c of content.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  assert.equal(content.map((c) => c.choices[0].delta.content || '').join(''), whole.choices[0].message.content);
  for (const c of chunks) assert.equal(c.id, chunks[0].id);

  const raw = await curl(['-N', '-H', 'content-type: application/json', '-d', JSON.stringify({ ...params, stream: true }), srv.base + '/v1/chat/completions']);
  assert.ok(raw.startsWith('data: {'));
  assert.ok(raw.endsWith('\n\ndata: [DONE]\n\n'));
  assert.ok(!raw.includes('"usage"'), 'no usage field unless asked');
});

test('n choices stream with their own indices', async () => {
  const stream = await client.chat.completions.create({ model: NAME, messages: hello, max_tokens: 6, n: 2, temperature: 0.8, seed: 3, stream: true });
  const text = ['', ''], roles = [0, 0], finish = [null, null];
  for await (const c of stream) for (const ch of c.choices) {
    if (ch.delta.role) roles[ch.index]++;
    text[ch.index] += ch.delta.content || '';
    if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
  }
  assert.deepEqual(roles, [1, 1]);
  assert.ok(finish.every((f) => f !== null));
});

test('logprobs with top_logprobs', async () => {
  const r = await client.chat.completions.create({ model: NAME, messages: hello, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 3);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6, 'greedy picks the best');
  }
});

test('text parts, system messages and max_completion_tokens', async () => {
  const a = await http(srv, 'POST', '/tokenize', { body: { messages: [{ role: 'user', content: [{ type: 'text', text: 'Hel' }, { type: 'text', text: 'lo!' }] }] } });
  const b = await http(srv, 'POST', '/tokenize', { body: { messages: [{ role: 'user', content: 'Hel\nlo!' }] } });
  assert.deepEqual(a.json.tokens, b.json.tokens);
  const r = await client.chat.completions.create({ model: NAME, messages: [{ role: 'system', content: 'Be brief.' }, ...hello], max_completion_tokens: 3, temperature: 0, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 3);
  const bad = await http(srv, 'POST', '/v1/chat/completions', { body: { model: NAME, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'messages');
});

test('a model without a chat template answers 400 on chat', async () => {
  const r = await http(stories, 'POST', '/v1/chat/completions', { body: { model: 'stories', messages: hello } });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.param, 'messages');
  assert.match(r.json.error.message, /template/);
});
