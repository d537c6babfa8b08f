// LangChain JS (@langchain/openai's ChatOpenAI over Chat Completions and the Responses API,
// OpenAIEmbeddings) against `xinfer serve` on the tiny Qwen2 model (real Qwen2.5 tokenizer and
// template, random weights). Under one seed every path must give the text the plain openai
// client gets (greedy, this model only writes newlines); structured output in all three
// withStructuredOutput modes must come back parsed and valid, since the grammar holds a random
// model to the schema.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { HumanMessage, SystemMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { startServer, http } from './lib/server.mjs';
import { personSchema, personZod, checkPerson } from './lib/person.mjs';

let srv, emb, client, chat;
const NAME = 'qwen-tiny';
const messages = [new SystemMessage('You are terse.'), new HumanMessage('Name a city.')];
const rawMessages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a city.' }];

before(async () => {
  [srv, emb] = await Promise.all([
    startServer('qwen2-tiny-random', ['--served-model-name', NAME]),
    startServer('qwen2-tiny-random', ['--served-model-name', 'emb', '--runner', 'pooling', '--max-model-len', '256']),
  ]);
  client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'x', maxRetries: 0 });
  chat = new ChatOpenAI({
    model: NAME, apiKey: 'x', temperature: 1, maxTokens: 16, maxRetries: 0,
    configuration: { baseURL: srv.base + '/v1' }, modelKwargs: { seed: 7 },
  });
});
after(async () => {
  assert.equal((await srv.stop()).code, 0);
  assert.equal((await emb.stop()).code, 0);
});

test('invoke: the answer the openai client gets, with usage and finish reason', async () => {
  const want = await client.chat.completions.create({ model: NAME, messages: rawMessages, max_tokens: 16, temperature: 1, seed: 7 });
  const r = await chat.invoke(messages);
  assert.ok(r.content.trim().length > 0, JSON.stringify(r.content));
  assert.equal(r.content, want.choices[0].message.content);
  assert.equal(r.response_metadata.finish_reason, want.choices[0].finish_reason);
  assert.equal(r.usage_metadata.input_tokens, want.usage.prompt_tokens);
  assert.equal(r.usage_metadata.output_tokens, want.usage.completion_tokens);
  assert.ok(r.usage_metadata.output_tokens > 0 && r.usage_metadata.output_tokens <= 16);
});

test('stream: the chunks add up to the invoked message, usage on the way', async () => {
  const whole = await chat.invoke(messages);
  let acc, n = 0;
  for await (const chunk of await chat.stream(messages)) {
    acc = acc === undefined ? chunk : acc.concat(chunk);
    n++;
  }
  assert.ok(n > 2, `${n} chunks`);
  assert.equal(acc.content, whole.content);
  assert.deepEqual(
    [acc.usage_metadata.input_tokens, acc.usage_metadata.output_tokens],
    [whole.usage_metadata.input_tokens, whole.usage_metadata.output_tokens]);
});

// sampled, so that the three modes see different answers, and with room to finish
const structuredModel = () => new ChatOpenAI({
  model: NAME, apiKey: 'x', temperature: 1, maxTokens: 300, maxRetries: 0,
  configuration: { baseURL: srv.base + '/v1' }, modelKwargs: { seed: 5 },
});

test('withStructuredOutput jsonSchema (zod): a schema-valid object, the raw text it came from', async () => {
  const r = await structuredModel().withStructuredOutput(personZod, { method: 'jsonSchema', name: 'person', strict: true, includeRaw: true })
    .invoke('Who?');
  checkPerson(r.parsed);
  assert.deepEqual(r.parsed, JSON.parse(r.raw.content));
  assert.equal(r.raw.response_metadata.finish_reason, 'stop');
});

test('withStructuredOutput functionCalling (JSON Schema): the forced tool call holds to the schema', async () => {
  const r = await structuredModel().withStructuredOutput({ title: 'person', ...personSchema }, { method: 'functionCalling', includeRaw: true })
    .invoke('Who?');
  checkPerson(r.parsed);
  assert.equal(r.raw.tool_calls.length, 1);
  assert.equal(r.raw.tool_calls[0].name, 'person');
  assert.deepEqual(r.raw.tool_calls[0].args, r.parsed);
});

// json_object holds no string to a length, so a random model would write one string until
// max_tokens; a bias towards '"' and '}' (their ids from /tokenize) lets it close the object.
test('withStructuredOutput jsonMode: json_object gives one JSON object, parsed', async () => {
  const bias = {};
  for (const t of ['"', '}']) {
    const r = await http(srv, 'POST', '/tokenize', { body: { model: NAME, prompt: t } });
    assert.equal(r.json.tokens.length, 1, t);
    bias[r.json.tokens[0]] = 8;
  }
  const m = new ChatOpenAI({
    model: NAME, apiKey: 'x', temperature: 1, maxTokens: 300, maxRetries: 0, logitBias: bias,
    configuration: { baseURL: srv.base + '/v1' }, modelKwargs: { seed: 5 },
  });
  const r = await m.withStructuredOutput(personSchema, { method: 'jsonMode', includeRaw: true }).invoke('Who? Answer in JSON.');
  assert.equal(r.raw.response_metadata.finish_reason, 'stop');
  assert.ok(r.parsed !== null && typeof r.parsed === 'object' && !Array.isArray(r.parsed), r.raw.content);
  assert.deepEqual(r.parsed, JSON.parse(r.raw.content));
});

test('bindTools with tool_choice named and required: calls with schema-valid arguments', async () => {
  const lookup = tool(async () => 'ok', { name: 'lookup', description: 'Look a person up.', schema: personZod });
  const weatherInput = z.object({ city: z.string().max(6) }).strict();
  const weather = tool(async () => 'sunny', { name: 'get_weather', description: 'Weather for a city.', schema: weatherInput });
  const m = structuredModel();
  const named = await m.bindTools([lookup, weather], { tool_choice: 'lookup' }).invoke('Who?');
  assert.equal(named.tool_calls.length, 1);
  assert.equal(named.tool_calls[0].name, 'lookup');
  checkPerson(named.tool_calls[0].args);
  const bound = m.bindTools([weather], { tool_choice: 'required' });
  const req = await bound.invoke('Weather?');
  assert.equal(req.response_metadata.finish_reason, 'tool_calls');
  assert.ok(req.tool_calls.length >= 1);
  for (const c of req.tool_calls) {
    assert.equal(c.name, 'get_weather');
    weatherInput.parse(c.args);
  }
  // the same seed, streamed: the chunks add up to the same calls
  let acc;
  for await (const chunk of await bound.stream('Weather?')) acc = acc === undefined ? chunk : acc.concat(chunk);
  assert.deepEqual(acc.tool_calls.map(({ name, args }) => ({ name, args })), req.tool_calls.map(({ name, args }) => ({ name, args })));
});

test('useResponsesApi: invoke and stream agree, withStructuredOutput jsonSchema parses', async () => {
  // /v1/responses takes no seed: greedy, and room for the schema's longest answer
  const m = (maxTokens) => new ChatOpenAI({
    model: NAME, apiKey: 'x', temperature: 0, maxTokens, maxRetries: 0, useResponsesApi: true,
    configuration: { baseURL: srv.base + '/v1' },
  });
  const want = await client.responses.create({ model: NAME, input: 'Who?', max_output_tokens: 8, temperature: 0 });
  const r = await m(8).invoke('Who?');
  assert.equal(r.text, want.output_text);
  assert.equal(r.usage_metadata.output_tokens, want.usage.output_tokens);
  let acc;
  for await (const c of await m(8).stream('Who?')) acc = acc === undefined ? c : acc.concat(c);
  assert.equal(acc.text, r.text);
  checkPerson(await m(600).withStructuredOutput(personZod, { method: 'jsonSchema', name: 'person' }).invoke('Who?'));
});

test('OpenAIEmbeddings: the vectors the openai client gets', async () => {
  const texts = ['hello', 'a longer sentence to embed'];
  const want = await new OpenAI({ baseURL: emb.base + '/v1', apiKey: 'x', maxRetries: 0 })
    .embeddings.create({ model: 'emb', input: texts, encoding_format: 'float' });
  const e = new OpenAIEmbeddings({ model: 'emb', apiKey: 'x', maxRetries: 0, configuration: { baseURL: emb.base + '/v1' } });
  const v = await e.embedDocuments(texts);
  assert.deepEqual(v, want.data.map((d) => d.embedding));
  assert.deepEqual(await e.embedQuery(texts[1]), v[1]);
});
