// The chat page and the dashboard in a real browser: Debian's Chromium (/usr/bin/chromium,
// or XINFER_CHROMIUM) driven by playwright-core, against `xinfer serve` on stories260K (a
// plain chat template so its stories read as answers) and qwen2-tiny-random (long random
// answers, behind an API key). Screenshots of both pages, light and dark, phone and laptop,
// go to XINFER_WEBUI_SHOTS (default build/webui-shots).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, http, metric, eventually, repoRoot } from '../e2e/lib/server.mjs';

const CHROMIUM = process.env.XINFER_CHROMIUM || '/usr/bin/chromium';
const SHOTS = path.resolve(repoRoot, process.env.XINFER_WEBUI_SHOTS || 'build/webui-shots');
const KEY = 'webui-test-key';
let stories, qwen, thinker, browser, page, profile, tmp;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'xinfer-webui-'));
  const template = path.join(tmp, 'plain.jinja');
  fs.writeFileSync(template, '{% for m in messages %}{{ m.content }}{% endfor %}');
  [stories, qwen, thinker] = await Promise.all([
    startServer('stories260K', ['--served-model-name', 'stories', '--chat-template', template]),
    startServer('qwen2-tiny-random', ['--served-model-name', 'qwen-tiny', '--max-model-len', '4096', '--api-key', KEY]),
    // deepseek_r1 reads an answer without </think> as all reasoning: a story is a long thought
    startServer('stories260K', ['--served-model-name', 'stories', '--chat-template', template, '--reasoning-parser', 'deepseek_r1']),
  ]);
  profile = path.join(tmp, 'profile');
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = browser.pages()[0] || await browser.newPage();
  page.on('pageerror', (e) => { throw e; });
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const f of fs.readdirSync(SHOTS)) if (f.endsWith('.png')) fs.rmSync(path.join(SHOTS, f));
});

after(async () => {
  await browser?.close();
  if (stories) assert.equal((await stories.stop()).code, 0);
  if (qwen) assert.equal((await qwen.stop()).code, 0);
  if (thinker) assert.equal((await thinker.stop()).code, 0);
  fs.rmSync(tmp, { recursive: true, force: true });
});

const stored = () => page.evaluate(() => JSON.parse(localStorage.getItem('xinfer.conversations') || '[]'));
const lastAnswer = () => page.locator('.msg.assistant').last();

async function apiChat(srv, messages, extra = {}, headers = {}) {
  const r = await http(srv, 'POST', '/v1/chat/completions', { body: { model: 'stories', messages, temperature: 0, ...extra }, headers });
  assert.equal(r.status, 200, r.text);
  return r.json.choices[0].message.content;
}

// Count the different texts the live answer shows while it streams.
async function watchStreaming() {
  await page.evaluate(() => {
    window.__seen = new Set();
    const box = document.getElementById('messages');
    window.__obs = new MutationObserver(() => {
      const live = box.querySelector('.bubble.cursor');
      if (live) window.__seen.add(live.textContent);
    });
    window.__obs.observe(box, { childList: true, subtree: true, characterData: true });
  });
}

test('a message streams its answer into the page, with tokens/s and TTFT', async () => {
  await page.goto(stories.base + '/');
  await page.locator('#model option[value="stories"]').waitFor({ state: 'attached' });
  await page.click('#settings-btn');
  await page.fill('#temperature', '0');
  await page.fill('#max_tokens', '200');
  await page.click('#settings-btn');
  await page.fill('#input', 'Once upon a time');
  await page.press('#input', 'Enter');
  await lastAnswer().locator('.stats').filter({ hasText: /TTFT/ }).waitFor();
  const stats = await lastAnswer().locator('.stats').textContent();
  assert.match(stats, /^\d+ tokens · \d+\.\d tok\/s · TTFT \d+ ms · (stop|length)$/);
  // the page sent what any client sends: the same answer comes back from the API directly
  const [conv] = await stored();
  assert.equal(conv.title, 'Once upon a time');
  assert.equal(conv.messages.length, 2);
  const want = await apiChat(stories, [{ role: 'user', content: 'Once upon a time' }], { max_tokens: 200 });
  assert.ok(want.length > 20);
  assert.equal(conv.messages[1].content, want);
  const words = (t) => t.replace(/\s+/g, ' ').trim();
  assert.equal(words(await lastAnswer().locator('.bubble').innerText()), words(want), 'the page shows the answer');
  assert.equal(Number(stats.match(/^(\d+)/)[1]), conv.messages[1].stats.tokens);
});

test('reloading the page finds the conversation again', async () => {
  const before = await lastAnswer().locator('.bubble').innerText();
  await page.reload();
  await page.locator('#conversations li', { hasText: 'Once upon a time' }).waitFor();
  assert.equal(await page.locator('#conversations li').count(), 1);
  assert.equal(await page.locator('.msg.user .bubble').first().textContent(), 'Once upon a time');
  assert.equal(await lastAnswer().locator('.bubble').innerText(), before);
});

test('regenerate gives the same greedy answer; an edited message is answered anew', async () => {
  const first = (await stored())[0].messages[1].content;
  await lastAnswer().getByRole('button', { name: 'Regenerate' }).click();
  await lastAnswer().getByRole('button', { name: 'Regenerate' }).waitFor();
  let [conv] = await stored();
  assert.equal(conv.messages.length, 2);
  assert.equal(conv.messages[1].content, first);

  await page.locator('.msg.user').getByRole('button', { name: 'Edit' }).click();
  await page.fill('.msg.user textarea', 'The little dog');
  await page.getByRole('button', { name: 'Save & send' }).click();
  await lastAnswer().getByRole('button', { name: 'Regenerate' }).waitFor();
  [conv] = await stored();
  assert.deepEqual(conv.messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(conv.messages[0].content, 'The little dog');
  assert.equal(conv.messages[1].content, await apiChat(stories, [{ role: 'user', content: 'The little dog' }], { max_tokens: 200 }));
});

test('the settings go into the request: system prompt, temperature, top_p, max_tokens, JSON mode', async () => {
  await page.click('#new-chat');
  await page.click('#settings-btn');
  await page.fill('#system', 'Tell a story.');
  await page.fill('#temperature', '0.5');
  await page.fill('#top_p', '0.9');
  await page.fill('#max_tokens', '40');
  await page.check('#json_mode');
  await page.click('#settings-btn');
  const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
  await page.fill('#input', 'A cat');
  await page.press('#input', 'Enter');
  const body = (await sent).postDataJSON();
  assert.deepEqual(body.messages, [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'A cat' }]);
  assert.equal(body.model, 'stories');
  assert.equal(body.temperature, 0.5);
  assert.equal(body.top_p, 0.9);
  assert.equal(body.max_tokens, 40);
  assert.deepEqual(body.response_format, { type: 'json_object' });
  assert.equal(body.stream, true);
  await lastAnswer().locator('.stats').filter({ hasText: /TTFT/ }).waitFor();
  const conv = (await stored()).find((c) => c.title === 'A cat');
  assert.match(conv.messages[1].content, /^\s*\{/, 'JSON mode: the answer opens a JSON object');
  // the settings outlive a reload; put them back for the tests after this one
  await page.reload();
  await page.click('#settings-btn');
  assert.equal(await page.inputValue('#system'), 'Tell a story.');
  assert.equal(await page.isChecked('#json_mode'), true);
  await page.fill('#system', '');
  await page.fill('#top_p', '');
  await page.uncheck('#json_mode');
  await page.click('#settings-btn');
});

test('export downloads every conversation as JSON; import brings them back', async () => {
  const before = await stored();
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
  const file = path.join(tmp, 'export.json');
  await download.saveAs(file);
  const data = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.deepEqual(data.conversations, before);
  for (let n = before.length; n > 0; n--) {
    await page.locator('#conversations li button').first().click();
    await eventually(async () => (await page.locator('#conversations li').count()) === n - 1, 2000);
  }
  assert.deepEqual(await stored(), []);
  await page.setInputFiles('#import', file);
  await page.locator('#conversations li').nth(before.length - 1).waitFor();
  assert.deepEqual((await stored()).map((c) => [c.title, c.messages]), before.map((c) => [c.title, c.messages]));
  await page.setInputFiles('#import', { name: 'bad.json', mimeType: 'application/json', buffer: Buffer.from('{"conversations": [{"messages": 3}]}') });
  await page.locator('#error', { hasText: 'Import failed' }).waitFor();
  assert.equal((await stored()).length, before.length, 'a bad file changes nothing');
});

test('reasoning (--reasoning-parser) is shown folded above the answer', async () => {
  await page.goto(thinker.base + '/');
  await page.locator('#model option[value="stories"]').waitFor({ state: 'attached' });
  await page.click('#settings-btn');
  await page.fill('#temperature', '0');
  await page.fill('#max_tokens', '60');
  await page.click('#settings-btn');
  await page.fill('#input', 'Once upon a time');
  await page.press('#input', 'Enter');
  await lastAnswer().locator('.stats').filter({ hasText: /TTFT/ }).waitFor();
  const r = await http(thinker, 'POST', '/v1/chat/completions', { body: { model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], temperature: 0, max_tokens: 60 } });
  const want = r.json.choices[0].message;
  assert.ok(want.reasoning_content.length > 20, JSON.stringify(want));
  const details = lastAnswer().locator('details.reasoning');
  assert.equal(await details.getAttribute('open'), null, 'folded once the answer is complete');
  assert.equal(await details.locator('summary').textContent(), 'Reasoning');
  assert.equal((await details.locator('div').textContent()), want.reasoning_content);
  const [conv] = await stored();
  assert.equal(conv.messages[1].reasoning, want.reasoning_content);
});

test('tool calls in a streamed answer are shown as calls', async () => {
  // No test model writes a tool call, so the page gets the chunks a tool-call answer streams
  // as the server forms them (tests/test_server_tools.c, completion.c): content first, then
  // the calls, with index and id, in one delta at the end.
  const chunk = (delta, finish = null) => 'data: ' + JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'stories', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }) + '\n\n';
  const sse = chunk({ role: 'assistant', content: '' }) + chunk({ reasoning_content: 'The user wants the weather.' }) +
    chunk({ content: 'Let me look. I will call:\n\n- **get_weather** with' }) + chunk({ content: ' `city`\n\n```json\n{"city": "Paris"}\n```\n' }) +
    chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] }, 'tool_calls') +
    'data: ' + JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'stories', choices: [], usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 } }) + '\n\ndata: [DONE]\n\n';
  await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: sse }));
  await page.click('#new-chat');
  await page.fill('#input', 'Weather in Paris?');
  await page.press('#input', 'Enter');
  await lastAnswer().locator('.tool-call').waitFor();
  await page.unroute('**/v1/chat/completions');
  assert.equal(await lastAnswer().locator('.tool-call b').textContent(), 'get_weather');
  assert.deepEqual(JSON.parse(await lastAnswer().locator('.tool-call code').textContent()), { city: 'Paris' });
  const bubble = lastAnswer().locator('.bubble');
  assert.equal(await bubble.locator('details.reasoning div').textContent(), 'The user wants the weather.');
  assert.equal(await bubble.locator('li strong').textContent(), 'get_weather');
  assert.equal(await bubble.locator('li code').textContent(), 'city');
  assert.equal(await bubble.locator('pre code.language-json').first().textContent(), '{"city": "Paris"}');
  assert.match(await lastAnswer().locator('.stats').textContent(), /^9 tokens .* tool_calls$/);
  await page.screenshot({ path: path.join(SHOTS, 'chat-rendering-light-laptop.png') });
  // sent back as the assistant's tool_calls when the conversation goes on
  const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
  await page.fill('#input', 'Thanks');
  await page.press('#input', 'Enter');
  const body = (await sent).postDataJSON();
  assert.equal(body.messages[1].tool_calls[0].function.name, 'get_weather');
  await lastAnswer().locator('.stats').filter({ hasText: /TTFT|HTTP/ }).or(page.locator('.msg.error')).first().waitFor();
});

test('the /v1 calls need the key, the page does not; Stop aborts a long answer on the server', async () => {
  await page.goto(qwen.base + '/');
  await page.locator('#key-field').waitFor();                     // shown: the server has --api-key
  assert.match(await page.locator('#error').textContent(), /API key/);
  await page.fill('#api_key', KEY);
  await page.locator('#api_key').dispatchEvent('change');
  await page.locator('#model option[value="qwen-tiny"]').waitFor({ state: 'attached' });
  assert.equal(await page.evaluate(() => localStorage.getItem('xinfer.apiKey')), KEY);
  await page.fill('#max_tokens', '3000');
  await page.click('#settings-btn');

  const aborted0 = (await metric(qwen, 'vllm:request_success_total', 'finished_reason="abort"')) || 0;
  await watchStreaming();
  await page.fill('#input', 'hi');
  await page.press('#input', 'Enter');
  await eventually(() => page.evaluate(() => window.__seen.size >= 3), 10000);
  const seen = await page.evaluate(() => { window.__obs.disconnect(); return [...window.__seen]; });
  assert.ok(seen.length >= 3, `the answer appeared in steps while streaming (${seen.length} states seen)`);
  assert.ok(seen.some((t) => t.length > 0));
  assert.equal(await metric(qwen, 'vllm:num_requests_running'), 1);
  await page.click('#stop');
  await lastAnswer().locator('.stats').filter({ hasText: 'stopped' }).waitFor();
  const ended = await eventually(async () => ((await metric(qwen, 'vllm:request_success_total', 'finished_reason="abort"')) || 0) > aborted0, 5000);
  assert.ok(ended, 'the server ended the request as aborted');
  assert.equal(await metric(qwen, 'vllm:num_requests_running'), 0);
  const gen = await metric(qwen, 'vllm:generation_tokens_total');
  assert.ok(gen < 3000, `generation stopped early (${gen} tokens)`);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await metric(qwen, 'vllm:generation_tokens_total'), gen, 'no tokens after the stop');
  const conv = (await stored()).find((c) => c.title === 'hi');
  assert.ok(conv.messages[1].content.length > 0, 'the part received is kept');
  assert.equal(conv.messages[1].stats.finish, 'stopped');
  // the dashboard needs no key either, and sees the engine idle again
  await page.goto(qwen.base + '/dashboard');
  await page.locator('#state', { hasText: 'live' }).waitFor();
  assert.equal(await page.locator('#running').textContent(), '0');
  assert.match(await page.locator('#done-sub').textContent(), /abort [1-9]/);
});

test('the dashboard\'s numbers move while a load runs', async () => {
  await page.goto(stories.base + '/dashboard');
  await page.locator('#state', { hasText: 'live' }).waitFor();
  const info = await page.locator('#info').textContent();
  const st = (await http(stories, 'GET', '/webui/status')).json;
  for (const v of ['stories', st.engine.kernels, st.engine.dtype, 'threads 1', 'quantization none']) assert.ok(info.includes(v), `${v} in "${info}"`);
  const num = async (id) => Number((await page.locator('#' + id).textContent()).replace(/[^\d.]/g, '')) || 0;
  const done0 = await num('done');

  // stories, 6 at a time, for 3 seconds
  let sent = 0, maxGen = 0, maxRunning = 0;
  const end = Date.now() + 3000;
  const one = async () => {
    while (Date.now() < end) {
      sent++;
      await http(stories, 'POST', '/v1/completions', { body: { model: 'stories', prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 1, seed: sent } });
    }
  };
  const load = Promise.all(Array.from({ length: 6 }, one));
  let loadDone = false;
  load.then(() => { loadDone = true; });
  while (!loadDone) {
    maxGen = Math.max(maxGen, await num('gtps'));
    maxRunning = Math.max(maxRunning, await num('running'));
    await new Promise((r) => setTimeout(r, 250));
  }
  await load;
  assert.ok(maxGen > 0, 'generation tokens/s rose above 0');
  assert.ok(maxRunning >= 1, 'running requests were seen');
  await eventually(async () => (await num('done')) >= done0 + sent, 5000);
  assert.equal(await num('done'), done0 + sent);
  assert.ok(await num('ttftn') >= sent, 'TTFT percentiles count the load\'s requests');
  assert.match(await page.locator('#ttft50').textContent(), /\d+ (ms|s)$/);
  assert.ok((await page.locator('#chart-tps polyline').count()) >= 1, 'the tokens/s chart has a line');
  // finished: running drops back to 0 and the KV cache empties
  await eventually(async () => (await num('running')) === 0 && (await page.locator('#kv').textContent()).startsWith('0'), 5000);
  assert.equal(await num('running'), 0);
});

test('screenshots of both pages, light and dark, phone and laptop', async () => {
  // the dashboard first: the page the load ran under still holds its history
  const sizes = [['laptop', 1366, 850], ['phone', 390, 844]];
  await page.locator('#state', { hasText: 'live' }).waitFor();
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [name, w, h] of sizes) {
      await page.setViewportSize({ width: w, height: h });
      await page.waitForTimeout(300);
      await page.screenshot({ path: path.join(SHOTS, `dashboard-${scheme}-${name}.png`), fullPage: true });
    }
  }
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [name, w, h] of sizes) {
      await page.setViewportSize({ width: w, height: h });
      await page.goto(stories.base + '/');
      if (await page.locator('#menu').isVisible()) await page.click('#menu');
      await page.locator('#conversations li', { hasText: 'Once upon a time' }).click();
      await page.waitForTimeout(300);                                // the phone's menu slides away
      await lastAnswer().locator('.stats').waitFor();
      await page.screenshot({ path: path.join(SHOTS, `chat-${scheme}-${name}.png`) });
    }
  }
  for (const f of fs.readdirSync(SHOTS).filter((f) => f.endsWith('.png')))
    assert.ok(fs.statSync(path.join(SHOTS, f)).size > 5000, f);
});
