// /v1/embeddings of `xinfer serve --runner pooling` with qwen2-tiny-random through the
// official OpenAI SDK (its embeddings.create asks for base64 by default and decodes it), and
// a sentence-transformers folder detected as a pooling model without any flag.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, http, metric, model } from './lib/server.mjs';

let srv, client, st, stDir;
const NAME = 'emb';
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

before(async () => {
  // a sentence-transformers layout around the same weights (links, nothing copied)
  stDir = fs.mkdtempSync(path.join(os.tmpdir(), 'xinfer-st-'));
  for (const f of fs.readdirSync(model('qwen2-tiny-random')))
    fs.symlinkSync(path.join(model('qwen2-tiny-random'), f), path.join(stDir, f));
  fs.writeFileSync(path.join(stDir, 'modules.json'), JSON.stringify([
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
    { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' }]));
  fs.mkdirSync(path.join(stDir, '1_Pooling'));
  fs.writeFileSync(path.join(stDir, '1_Pooling', 'config.json'), JSON.stringify({
    word_embedding_dimension: 64, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false,
    pooling_mode_lasttoken: true }));
  [srv, st] = await Promise.all([
    startServer('qwen2-tiny-random', ['--served-model-name', NAME, '--runner', 'pooling', '--max-model-len', '256']),
    startServer(path.relative(model(''), stDir), ['--served-model-name', 'st', '--max-model-len', '256']),
  ]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await st.stop()).code, 0);
  fs.rmSync(stDir, { recursive: true, force: true });
});

test('embeddings.create: unit vectors, base64 and float agree, usage', async () => {
  const input = ['Hello', 'The quick brown fox jumps over the lazy dog'];
  const b64 = await client.embeddings.create({ model: NAME, input });
  const flt = await client.embeddings.create({ model: NAME, input, encoding_format: 'float' });
  assert.equal(b64.object, 'list');
  assert.equal(b64.model, NAME);
  assert.equal(b64.data.length, 2);
  for (let i = 0; i < 2; i++) {
    assert.equal(b64.data[i].index, i);
    assert.equal(b64.data[i].object, 'embedding');
    assert.equal(b64.data[i].embedding.length, 64);
    assert.ok(Math.abs(norm(b64.data[i].embedding) - 1) < 1e-5);
    assert.deepEqual(Array.from(b64.data[i].embedding), flt.data[i].embedding);
  }
  assert.notDeepEqual(flt.data[0].embedding, flt.data[1].embedding);
  assert.ok(b64.usage.prompt_tokens >= 3);
  assert.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  // one by one gives the same vectors as the list; token ids the same as the text
  const one = await client.embeddings.create({ model: NAME, input: input[1], encoding_format: 'float' });
  assert.deepEqual(one.data[0].embedding, flt.data[1].embedding);
  const ids = await client.embeddings.create({ model: NAME, input: [9707], encoding_format: 'float' });
  assert.deepEqual(ids.data[0].embedding, flt.data[0].embedding);
});

test('dimensions cut and renormalise; too many is a 400', async () => {
  const r = await client.embeddings.create({ model: NAME, input: 'Hello', dimensions: 16, encoding_format: 'float' });
  assert.equal(r.data[0].embedding.length, 16);
  assert.ok(Math.abs(norm(r.data[0].embedding) - 1) < 1e-5);
  await assert.rejects(client.embeddings.create({ model: NAME, input: 'Hello', dimensions: 65 }),
    (e) => e.status === 400 && /dimensions/.test(e.message));
  await assert.rejects(client.embeddings.create({ model: 'other', input: 'Hello' }), (e) => e.status === 404);
});

test('a pooling model answers no completions; its prompt tokens are counted', async () => {
  await assert.rejects(client.chat.completions.create({ model: NAME, messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e.status === 400 && /Chat Completions/.test(e.message));
  const r = await http(srv, 'POST', '/v1/completions', { body: { model: NAME, prompt: 'hi' } });
  assert.equal(r.status, 400);
  assert.ok((await metric(srv, 'vllm:prompt_tokens_total')) >= 10);
});

test('a sentence-transformers last-token folder is served as pooling without a flag', async () => {
  const c = new OpenAI({ baseURL: st.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const a = await c.embeddings.create({ model: 'st', input: 'Hello', encoding_format: 'float' });
  const b = await client.embeddings.create({ model: NAME, input: 'Hello', encoding_format: 'float' });
  assert.deepEqual(a.data[0].embedding, b.data[0].embedding);
  assert.match(st.log, /runner: pooling/);
});
