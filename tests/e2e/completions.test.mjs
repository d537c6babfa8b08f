// /v1/completions, /v1/models, /tokenize, /detokenize, /health, /version and /metrics of
// `xinfer serve` with stories260K, through the official OpenAI SDK and raw HTTP.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, http, curl, metric } from './lib/server.mjs';

let srv, client;
const NAME = 'stories';

before(async () => {
  srv = await startServer('stories260K', ['--served-model-name', NAME, 'alias']);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0, 'server exits 0 on SIGTERM');
});

test('models lists every served name with max_model_len', async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, [NAME, 'alias']);
  assert.equal(list.data[0].object, 'model');
  assert.equal(list.data[0].max_model_len, 512);
});

test('health and version answer', async () => {
  assert.equal((await http(srv, 'GET', '/health')).status, 200);
  const v = await http(srv, 'GET', '/version');
  assert.equal(v.status, 200);
  assert.match(v.json.version, /^\d+\.\d+\.\d+/);
});

test('greedy completion through the SDK has usage and a cmpl id', async () => {
  const r = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  assert.match(r.id, /^cmpl-[0-9a-f]+$/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, NAME);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.choices[0].text.length > 10);
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, 20);
  assert.equal(r.usage.total_tokens, 25);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  // the alias name serves the same model, deterministically
  const again = await client.completions.create({ model: 'alias', prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  assert.equal(again.choices[0].text, r.choices[0].text);
  assert.equal(again.model, NAME);
});

test('streamed completion concatenates to the non-streamed text', async () => {
  const params = { model: NAME, prompt: 'The little dog', max_tokens: 24, temperature: 0 };
  const whole = await client.completions.create(params);
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(n > 3);
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('prompt as token ids, lists of strings and lists of ids', async () => {
  const tok = await http(srv, 'POST', '/tokenize', { body: { model: NAME, prompt: 'Once upon a time' } });
  assert.equal(tok.status, 200);
  assert.equal(tok.json.count, tok.json.tokens.length);
  assert.equal(tok.json.max_model_len, 512);
  const ids = tok.json.tokens;
  const fromText = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  const fromIds = await client.completions.create({ model: NAME, prompt: ids, max_tokens: 8, temperature: 0 });
  assert.equal(fromIds.choices[0].text, fromText.choices[0].text);
  const multi = await client.completions.create({ model: NAME, prompt: ['Once upon a time', 'The cat'], max_tokens: 8, temperature: 0 });
  assert.deepEqual(multi.choices.map((c) => c.index), [0, 1]);
  assert.equal(multi.choices[0].text, fromText.choices[0].text);
  const multiIds = await client.completions.create({ model: NAME, prompt: [ids, ids], max_tokens: 8, temperature: 0 });
  assert.equal(multiIds.choices[1].text, fromText.choices[0].text);
  assert.equal(multiIds.usage.prompt_tokens, 2 * ids.length);
  assert.equal(multiIds.usage.completion_tokens, 16);
});

test('n samples with a seed are reproducible and indexed', async () => {
  const p = { model: NAME, prompt: 'Once upon a time', max_tokens: 12, temperature: 1.0, n: 3, seed: 42 };
  const a = await client.completions.create(p);
  const b = await client.completions.create(p);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 36);
});

test('echo returns the prompt first, with prompt logprobs when asked', async () => {
  const r = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 4, temperature: 0, echo: true, logprobs: 2 });
  const c = r.choices[0];
  assert.ok(c.text.startsWith('Once upon a time'), c.text);
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, r.usage.prompt_tokens + 4);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < lp.tokens.length; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 1);
  }
  assert.equal(lp.text_offset.length, lp.tokens.length);
  // greedy: the generated token is the best alternative
  const last = lp.tokens.length - 1;
  const best = Math.max(...Object.values(lp.top_logprobs[last]));
  assert.ok(Math.abs(best - lp.token_logprobs[last]) < 1e-6);
});

test('stop strings end the text with finish_reason stop', async () => {
  const base = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 30, temperature: 0 });
  const words = base.choices[0].text.trim().split(/\s+/);
  const stopWord = words[3];
  const r = await client.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: [stopWord, 'zzzz'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!r.choices[0].text.includes(stopWord));
  assert.ok(base.choices[0].text.startsWith(r.choices[0].text));
  assert.equal(r.choices[0].stop_reason, stopWord);
});

test('detokenize inverts tokenize', async () => {
  const tok = await http(srv, 'POST', '/tokenize', { body: { prompt: 'Lily saw a big tree.', add_special_tokens: false } });
  const det = await http(srv, 'POST', '/detokenize', { body: { tokens: tok.json.tokens } });
  assert.equal(det.status, 200);
  assert.equal(det.json.prompt, 'Lily saw a big tree.');
  const bad = await http(srv, 'POST', '/detokenize', { body: { tokens: [1, 99999] } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'tokens');
});

test('raw SSE framing: data lines, blank-line separators, [DONE] last', async () => {
  const out = await curl(['-N', '-H', 'content-type: application/json', '-d',
    JSON.stringify({ model: NAME, prompt: 'Once', max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    srv.base + '/v1/completions']);
  assert.ok(out.endsWith('data: [DONE]\n\n'), JSON.stringify(out.slice(-40)));
  const events = out.split('\n\n').slice(0, -1);
  for (const e of events) assert.match(e, /^data: /);
  const payloads = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
  const usage = payloads.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 5);
  const content = payloads.slice(0, -1);
  assert.equal(content.at(-1).choices[0].finish_reason, 'length');
  for (const p of content.slice(0, -1)) assert.equal(p.choices[0].finish_reason, null);
  for (const p of content) assert.equal(p.usage, null);
  const headers = await curl(['-s', '-D', '-', '-o', '/dev/null', '-H', 'content-type: application/json', '-d',
    JSON.stringify({ model: NAME, prompt: 'Once', max_tokens: 2, stream: true }), srv.base + '/v1/completions']);
  assert.match(headers, /content-type: text\/event-stream/i);
});

test('metrics carry vLLM names, model_name labels and histograms', async () => {
  const r = await http(srv, 'GET', '/metrics');
  assert.equal(r.status, 200);
  for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
    'vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total', 'vllm:num_preemptions_total',
    'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:request_success_total',
    'vllm:time_to_first_token_seconds_bucket', 'vllm:inter_token_latency_seconds_bucket',
    'vllm:e2e_request_latency_seconds_bucket', 'vllm:request_queue_time_seconds_bucket',
    'vllm:request_prefill_time_seconds_bucket', 'vllm:request_decode_time_seconds_bucket',
    'vllm:request_inference_time_seconds_bucket', 'vllm:request_prompt_tokens_bucket',
    'vllm:request_generation_tokens_bucket']) {
    assert.ok(r.text.includes(`${name}{`), `missing ${name}`);
  }
  assert.ok(r.text.includes(`model_name="${NAME}"`));
  assert.ok((await metric(srv, 'vllm:generation_tokens_total')) > 0);
  assert.ok((await metric(srv, 'vllm:request_success_total', 'finished_reason="length"')) > 0);
  assert.ok((await metric(srv, 'vllm:e2e_request_latency_seconds_count')) > 0);
});
