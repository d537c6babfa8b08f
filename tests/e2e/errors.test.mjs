// Bad input and hostile clients: every error has OpenAI's shape and the right status, and
// none of them hurts the server (it still answers afterwards).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, http, curl } from './lib/server.mjs';

let srv, keyed;
const NAME = 'stories';

before(async () => {
  [srv, keyed] = await Promise.all([
    startServer('stories260K', ['--served-model-name', NAME, '--max-request-body-bytes', '1M']),
    startServer('stories260K', ['--served-model-name', NAME, '--api-key', 'k-123'], { env: { VLLM_API_KEY: 'k-env' } }),
  ]);
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await keyed.stop()).code, 0);
});

function assertError(r, status, param) {
  assert.equal(r.status, status, r.text);
  const e = r.json && r.json.error;
  assert.ok(e, r.text);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, r.text);
  if (param !== undefined) assert.equal(e.param, param, r.text);
}

const C = '/v1/completions', CHAT = '/v1/chat/completions';

test('out-of-range and wrongly typed values are 400 naming the parameter', async () => {
  const cases = [
    [{ temperature: -0.5 }, 'temperature'], [{ temperature: 'hot' }, 'temperature'],
    [{ top_p: 0 }, 'top_p'], [{ top_p: 1.01 }, 'top_p'], [{ n: 0 }, 'n'], [{ n: 'two' }, 'n'],
    [{ max_tokens: -3 }, 'max_tokens'], [{ top_k: -7 }, 'top_k'], [{ min_p: 1.5 }, 'min_p'],
    [{ presence_penalty: 9 }, 'presence_penalty'], [{ stop: 7 }, 'stop'],
    [{ logprobs: 99 }, 'logprobs'], [{ logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ stream: 'yes' }, 'stream'], [{ stream_options: { include_usage: true } }, 'stream_options'],
    [{ seed: 0.5 }, 'seed'], [{ prompt: 42 }, 'prompt'], [{ prompt: [] }, 'prompt'],
    [{ prompt: [[1, 2], 'x'] }, 'prompt'], [{ prompt: [1, 9999] }, 'prompt'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }, 'response_format'],
  ];
  for (const [patch, param] of cases) {
    const body = { model: NAME, prompt: 'Once', max_tokens: 3, ...patch };
    assertError(await http(srv, 'POST', C, { body }), 400, param);
  }
  assertError(await http(srv, 'POST', CHAT, { body: { model: NAME, messages: 'hi' } }), 400, 'messages');
  assertError(await http(srv, 'POST', CHAT, { body: { model: NAME, messages: [{ role: 'user', content: 'x' }], temperature: -1 } }), 400, 'temperature');
});

test('malformed JSON and non-object bodies are 400', async () => {
  for (const raw of ['{', '', '[1]', '{"prompt": "x",}', 'null', '{"prompt":"\\ud800"}']) {
    assertError(await http(srv, 'POST', C, { raw, headers: { 'content-type': 'application/json' } }), 400);
  }
});

test('unknown model is 404 and unknown route is 404', async () => {
  assertError(await http(srv, 'POST', C, { body: { model: 'gpt-5', prompt: 'x' } }), 404, 'model');
  assertError(await http(srv, 'POST', CHAT, { body: { model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] } }), 404, 'model');
  assertError(await http(srv, 'POST', '/tokenize', { body: { model: 'gpt-5', prompt: 'x' } }), 404, 'model');
  assertError(await http(srv, 'GET', '/v1/nothing'), 404);
  assertError(await http(srv, 'GET', '/nothing'), 404);  // / is the chat page
});

test('prompt plus max_tokens over max-model-len is 400 saying by how much', async () => {
  const r = await http(srv, 'POST', C, { body: { model: NAME, prompt: 'Once upon a time', max_tokens: 600 } });
  assertError(r, 400);
  assert.match(r.json.error.message, /512/);
  assert.match(r.json.error.message, /93 over/);
  const long = await http(srv, 'POST', C, { body: { model: NAME, prompt: Array(600).fill(5) } });
  assertError(long, 400, 'prompt');
  assert.match(long.json.error.message, /over the limit/);
});

test('body over the limit is 413, with and without Content-Length', async () => {
  const big = JSON.stringify({ model: NAME, prompt: 'a'.repeat(2 << 20) });
  assertError(await http(srv, 'POST', C, { raw: big, headers: { 'content-type': 'application/json' } }), 413);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xinfer-e2e-'));
  const file = path.join(dir, 'big.json');
  fs.writeFileSync(file, big);
  // a chunked upload has no Content-Length: counted as it arrives, then refused
  const out = await curl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'Transfer-Encoding: chunked',
    '-H', 'content-type: application/json', '--data-binary', '@' + file, srv.base + C]);
  fs.rmSync(dir, { recursive: true });
  assert.equal(out, '413');
});

test('API key: 401 on /v1/*, /tokenize, /detokenize; open /health, /version, /metrics', async () => {
  for (const [m, route, body] of [['GET', '/v1/models'], ['POST', C, { prompt: 'x' }],
    ['POST', CHAT, { messages: [] }], ['POST', '/tokenize', { prompt: 'x' }], ['POST', '/detokenize', { tokens: [1] }]]) {
    assertError(await http(keyed, m, route, { body }), 401);
    assertError(await http(keyed, m, route, { body, headers: { authorization: 'Bearer k-12' } }), 401);
    assertError(await http(keyed, m, route, { body, headers: { authorization: 'Bearer k-1234' } }), 401);
  }
  assert.equal((await http(keyed, 'GET', '/health')).status, 200);
  assert.equal((await http(keyed, 'GET', '/version')).status, 200);
  assert.equal((await http(keyed, 'GET', '/metrics')).status, 200);
  const ok = new OpenAI({ baseURL: keyed.base + '/v1', apiKey: 'k-123', maxRetries: 0 });
  const r = await ok.completions.create({ model: NAME, prompt: 'Once', max_tokens: 2 });
  assert.equal(r.choices.length, 1);
  const env = new OpenAI({ baseURL: keyed.base + '/v1', apiKey: 'k-env', maxRetries: 0 });
  assert.equal((await env.models.list()).data[0].id, NAME);
  const bad = new OpenAI({ baseURL: keyed.base + '/v1', apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
});

test('garbage bytes, truncated requests and early hang-ups do not hurt the server', async () => {
  const send = (bytes) => new Promise((resolve) => {
    const s = net.connect(srv.port, '127.0.0.1', () => { s.end(bytes); });
    s.on('data', () => {});
    s.on('error', () => resolve());
    s.on('close', () => resolve());
    setTimeout(() => { s.destroy(); resolve(); }, 2000);
  });
  await send(Buffer.from([0, 1, 2, 255, 254, 10, 13, 10, 13]));
  await send('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt":');
  await send('GET /health HTTP/1.1\r\n' + 'X-Long: ' + 'a'.repeat(200000) + '\r\n\r\n');
  await send('POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
  assert.equal((await http(srv, 'GET', '/health')).status, 200);
  const r = await http(srv, 'POST', C, { body: { model: NAME, prompt: 'Once', max_tokens: 2 } });
  assert.equal(r.status, 200);
});
