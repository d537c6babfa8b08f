// Many clients at once, clients that vanish, slow readers, a full queue and shutdown.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { startServer, http, metric, eventually } from './lib/server.mjs';

let srv, client;
const NAME = 'stories';
const starts = ['Once upon a time', 'The little dog', 'Lily and Ben', 'One day, a bird', 'Tom had a red ball',
  'The sun was', 'In the park', 'Mom said'];

before(async () => {
  srv = await startServer('stories260K', ['--served-model-name', NAME]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
});

async function streamText(params, signal) {
  const stream = await client.completions.create({ ...params, stream: true }, { signal });
  let text = '', finish = null;
  for await (const chunk of stream) for (const c of chunk.choices) {
    text += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

async function idle() {
  const ok = await eventually(async () => (await metric(srv, 'vllm:num_requests_running')) === 0 &&
    (await metric(srv, 'vllm:num_requests_waiting')) === 0 &&
    (await metric(srv, 'vllm:kv_cache_usage_perc')) === 0);
  return ok;
}

test('64 simultaneous greedy streams equal the same requests run one by one', async () => {
  const reqs = Array.from({ length: 64 }, (_, i) => ({
    model: NAME, prompt: `${starts[i % starts.length]}${i >= 8 ? ' ' + 'and'.repeat(i % 5) : ''}`,
    max_tokens: 16 + (i % 7) * 4, temperature: 0,
  }));
  const alone = [];
  for (const r of reqs) alone.push((await client.completions.create(r)).choices[0].text);
  const together = await Promise.all(reqs.map((r) => streamText(r)));
  for (let i = 0; i < reqs.length; i++) {
    assert.equal(together[i].text, alone[i], `request ${i} (${reqs[i].prompt})`);
    assert.ok(['length', 'stop'].includes(together[i].finish));
  }
  assert.ok(await idle(), 'running 0, waiting 0 and KV usage 0 afterwards');
});

test('a client that disconnects mid-stream aborts its request and frees its blocks', async () => {
  const before = (await metric(srv, 'vllm:request_success_total', 'finished_reason="abort"')) || 0;
  const ac = new AbortController();
  const stream = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 480, ignore_eos: true, temperature: 0, stream: true }, { signal: ac.signal });
  let chunks = 0;
  try {
    for await (const c of stream) { if (++chunks === 3) ac.abort(); }
  } catch { /* aborted */ }
  assert.ok(chunks >= 3);
  const aborted = await eventually(async () => ((await metric(srv, 'vllm:request_success_total', 'finished_reason="abort"')) || 0) > before);
  assert.ok(aborted, 'the request ended as aborted');
  assert.ok(await idle());
});

test('a client that hangs up while waiting for a non-streamed answer aborts it', async () => {
  const before = (await metric(srv, 'vllm:request_success_total', 'finished_reason="abort"')) || 0;
  // other work in the batch keeps the request running long enough to hang up on it
  const load = Array.from({ length: 16 }, (_, i) => streamText({ model: NAME, prompt: starts[i % 8], max_tokens: 400, ignore_eos: true, temperature: 0 }));
  const ac = new AbortController();
  const pending = client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 480, ignore_eos: true, temperature: 0 }, { signal: ac.signal });
  await eventually(async () => (await metric(srv, 'vllm:num_requests_running')) === 17, 5000);
  ac.abort();
  await assert.rejects(pending);
  await Promise.all(load);
  const aborted = await eventually(async () => ((await metric(srv, 'vllm:request_success_total', 'finished_reason="abort"')) || 0) > before);
  assert.ok(aborted, 'the request ended as aborted');
  assert.ok(await idle());
});

test('a slow reader loses nothing and does not stall other requests', async () => {
  const body = JSON.stringify({ model: NAME, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 0, stream: true });
  const sock = net.connect(srv.port, '127.0.0.1');
  await new Promise((r) => sock.on('connect', r));
  sock.pause();
  sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  // while nobody reads the stream, other requests are served promptly
  const t0 = Date.now();
  const other = await client.completions.create({ model: NAME, prompt: 'The cat', max_tokens: 8, temperature: 0 });
  assert.equal(other.choices[0].finish_reason, 'length');
  assert.ok(Date.now() - t0 < 5000);
  await new Promise((r) => setTimeout(r, 500));
  let raw = '';
  sock.on('data', (d) => { raw += d.toString(); });
  sock.resume();
  await new Promise((r) => sock.on('close', r));
  // undo chunked transfer encoding, then collect the SSE payloads
  const bodyStart = raw.indexOf('\r\n\r\n') + 4;
  let rest = raw.slice(bodyStart), sse = '';
  while (rest.length) {
    const nl = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, nl), 16);
    if (!size) break;
    sse += rest.slice(nl + 2, nl + 2 + size);
    rest = rest.slice(nl + 2 + size + 2);
  }
  assert.ok(sse.endsWith('data: [DONE]\n\n'));
  const text = sse.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)).choices[0].text).join('');
  const whole = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 0 });
  assert.equal(text, whole.choices[0].text);
});

test('a full waiting queue answers 503 and the server recovers', async () => {
  const small = await startServer('stories260K', ['--served-model-name', NAME, '--max-num-seqs', '1', '--max-queue-len', '1']);
  try {
    const body = { model: NAME, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 0 };
    const rs = await Promise.all(Array.from({ length: 8 }, () => http(small, 'POST', '/v1/completions', { body })));
    const statuses = rs.map((r) => r.status);
    assert.ok(statuses.includes(503), statuses.join(','));
    assert.ok(statuses.includes(200), statuses.join(','));
    for (const r of rs.filter((x) => x.status === 503)) {
      assert.equal(r.json.error.type, 'server_error');
      assert.match(r.json.error.message, /queue/);
    }
    const after = await http(small, 'POST', '/v1/completions', { body: { ...body, max_tokens: 4 } });
    assert.equal(after.status, 200);
  } finally {
    assert.equal((await small.stop()).code, 0);
  }
});

test('SIGTERM during a stream: the stream ends cleanly and the server exits 0', async () => {
  const s = await startServer('stories260K', ['--served-model-name', NAME, '--shutdown-timeout', '0.2']);
  const c = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'x', maxRetries: 0 });
  const stream = await c.completions.create({ model: NAME, prompt: 'Once', max_tokens: 500, ignore_eos: true, stream: true });
  let n = 0, finish = null;
  for await (const chunk of stream) {
    if (++n === 2) s.proc.kill('SIGTERM');
    for (const ch of chunk.choices) if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.ok(['abort', 'length'].includes(finish), String(finish));
  const { code } = await s.exited;
  assert.equal(code, 0);
  assert.match(s.log, /Shutting down/);
});
