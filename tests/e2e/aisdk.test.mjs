// The AI SDK (`ai` with @ai-sdk/openai-compatible for Chat Completions, @ai-sdk/openai for the
// Responses API) against `xinfer serve` on the tiny Qwen2 model (real Qwen2.5 tokenizer and
// template, random weights). Text under one seed must be what the plain openai client gets,
// streamed or not (greedy, this model only writes newlines); generateObject, Output.object
// and forced tool calls must come back schema-valid, since the grammar holds a random model
// to the schema. The SDK's warnings (a setting the provider dropped, say) are collected and
// must be none. Embeddings: embedMany against a --runner pooling server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { generateText, streamText, generateObject, Output, tool, embedMany } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { startServer } from './lib/server.mjs';
import { personZod, checkPerson } from './lib/person.mjs';

let srv, emb, client, chatModel, responsesModel;
const NAME = 'qwen-tiny';
const system = 'You are terse.';
const prompt = 'Name a city.';
const seeded = { system, prompt, temperature: 1, seed: 7, maxOutputTokens: 16, maxRetries: 0 };
const greedy = { ...seeded, temperature: 0, seed: undefined };
const sampled = { prompt: 'Who?', temperature: 1, seed: 5, maxOutputTokens: 300, maxRetries: 0 };

// every warning but generateObject's deprecation notice (much code still calls it)
const warnings = [];
globalThis.AI_SDK_LOG_WARNINGS = ({ warnings: ws }) => warnings.push(...ws.filter((w) => w.type !== 'deprecated'));

before(async () => {
  [srv, emb] = await Promise.all([
    startServer('qwen2-tiny-random', ['--served-model-name', NAME]),
    startServer('qwen2-tiny-random', ['--served-model-name', 'emb', '--runner', 'pooling', '--max-model-len', '256']),
  ]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
  const provider = createOpenAICompatible({
    name: 'xinfer', baseURL: srv.base + '/v1', apiKey: 'x', includeUsage: true, supportsStructuredOutputs: true,
  });
  chatModel = provider.chatModel(NAME);
  responsesModel = createOpenAI({ baseURL: srv.base + '/v1', apiKey: 'x' }).responses(NAME);
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await emb.stop()).code, 0);
  assert.deepEqual(warnings, []);
});

test('generateText and streamText: the answer the openai client gets, same usage', async () => {
  const want = await client.chat.completions.create({
    model: NAME, messages: [{ role: 'system', content: system }, { role: 'user', content: prompt }], max_tokens: 16, temperature: 1, seed: 7,
  });
  const r = await generateText({ model: chatModel, ...seeded });
  assert.ok(r.text.trim().length > 0, JSON.stringify(r.text));
  assert.equal(r.text, want.choices[0].message.content);
  assert.equal(r.finishReason, want.choices[0].finish_reason === 'length' ? 'length' : 'stop');
  assert.equal(r.usage.inputTokens, want.usage.prompt_tokens);
  assert.equal(r.usage.outputTokens, want.usage.completion_tokens);

  const s = streamText({ model: chatModel, ...seeded });
  const parts = [];
  for await (const t of s.textStream) parts.push(t);
  assert.ok(parts.length > 2, `${parts.length} parts`);
  assert.equal(parts.join(''), r.text);
  assert.equal(await s.finishReason, r.finishReason);
  const u = await s.usage;
  assert.deepEqual([u.inputTokens, u.outputTokens], [r.usage.inputTokens, r.usage.outputTokens]);
});

test('generateObject and streamText with Output.object: schema-valid objects', async () => {
  const r = await generateObject({ model: chatModel, schema: personZod, schemaName: 'person', ...sampled });
  checkPerson(r.object);
  assert.equal(r.finishReason, 'stop');
  const s = streamText({ model: chatModel, output: Output.object({ schema: personZod, name: 'person' }), ...sampled, seed: 6 });
  let partials = 0;
  for await (const p of s.partialOutputStream) partials += p !== undefined;
  const o = await s.output;
  checkPerson(o);
  assert.ok(partials > 1, `${partials} partial objects`);
  assert.notDeepEqual(o, r.object);
});

test('tool calls: a named tool and toolChoice required give schema-valid inputs', async () => {
  const lookup = tool({ description: 'Look a person up.', inputSchema: personZod });
  const weatherInput = z.object({ city: z.string().max(6) }).strict();
  const weather = tool({ description: 'Weather for a city.', inputSchema: weatherInput });
  const named = await generateText({ model: chatModel, tools: { lookup, weather }, toolChoice: { type: 'tool', toolName: 'lookup' }, ...sampled });
  assert.equal(named.toolCalls.length, 1);
  assert.equal(named.toolCalls[0].toolName, 'lookup');
  checkPerson(named.toolCalls[0].input);
  const req = await generateText({ model: chatModel, tools: { weather }, toolChoice: 'required', ...sampled, prompt: 'Weather?' });
  assert.equal(req.finishReason, 'tool-calls');
  assert.ok(req.toolCalls.length >= 1);
  for (const c of req.toolCalls) {
    assert.equal(c.toolName, 'weather');
    weatherInput.parse(c.input);
  }
  // the same seed, streamed: the same calls
  const s = streamText({ model: chatModel, tools: { weather }, toolChoice: 'required', ...sampled, prompt: 'Weather?' });
  assert.deepEqual((await s.toolCalls).map((c) => c.input), req.toolCalls.map((c) => c.input));
  assert.equal(await s.finishReason, 'tool-calls');
});

// greedy: the SDK sends no seed to /v1/responses
test('Responses API (@ai-sdk/openai): generateText, streamText and generateObject', async () => {
  const want = await client.responses.create({ model: NAME, instructions: system, input: prompt, max_output_tokens: 16, temperature: 0 });
  const r = await generateText({ model: responsesModel, ...greedy });
  assert.equal(r.text, want.output_text);
  assert.equal(r.usage.inputTokens, want.usage.input_tokens);
  assert.equal(r.usage.outputTokens, want.usage.output_tokens);
  const s = streamText({ model: responsesModel, ...greedy });
  let text = '';
  for await (const t of s.textStream) text += t;
  assert.equal(text, r.text);
  const o = await generateObject({ model: responsesModel, schema: personZod, schemaName: 'person', prompt: 'Who?', temperature: 0, maxOutputTokens: 600, maxRetries: 0 });
  checkPerson(o.object);
  assert.equal(o.finishReason, 'stop');
});

test('embedMany: the vectors the openai client gets, and usage', async () => {
  const values = ['hello', 'a longer sentence to embed'];
  const want = await new OpenAI({ baseURL: emb.base + '/v1', apiKey: 'x', maxRetries: 0 })
    .embeddings.create({ model: 'emb', input: values, encoding_format: 'float' });
  const provider = createOpenAICompatible({ name: 'xinfer', baseURL: emb.base + '/v1', apiKey: 'x' });
  const r = await embedMany({ model: provider.embeddingModel('emb'), values, maxRetries: 0 });
  assert.deepEqual(r.embeddings, want.data.map((d) => d.embedding));
  assert.equal(r.usage.tokens, want.usage.prompt_tokens);
});
