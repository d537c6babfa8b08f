// The `xinfer serve` command line as scripts use it: errors, --help, the MODEL/--model rule,
// a Unix socket, --chat-template.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bin, model, startServer, http, curl } from './lib/server.mjs';

function run(args) {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: 30000 }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, stdout, stderr }));
  });
}

test('--help lists the vLLM flags and exits 0', async () => {
  const r = await run(['serve', '--help']);
  assert.equal(r.code, 0);
  for (const f of ['--served-model-name', '--api-key', '--max-model-len', '--kv-cache-memory-bytes',
    '--enable-prefix-caching', '--tensor-parallel-size', '--max-queue-len', '--uds', '--chat-template']) {
    assert.ok(r.stdout.includes(f), f);
  }
});

test('unknown flags, bad values and a -tp that cuts the heads fail naming the flag', async () => {
  let r = await run(['serve', model('stories260K'), '--no-such-flag']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /--no-such-flag/);
  r = await run(['serve', model('stories260K'), '--port=http']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /--port/);
  r = await run(['serve', model('stories260K'), '-tp', '0']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /-tp: 0 is out of range/);
  r = await run(['serve', model('stories260K'), '-tp', '3', '--host', '127.0.0.1', '--port', '0']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /-tp 3: 8 attention heads do not split 3 ways; -tp values that work for this model: 1, 2, 4/);
  r = await run(['serve', '/no/such/model/folder', '--port', '0']);
  assert.notEqual(r.code, 0);
});

test('NAME --model PATH serves PATH as NAME, with a notice; ignored vLLM flags get one too', async () => {
  const s = await startServer('stories260K', ['--enforce-eager', '--swap-space', '4']);
  // startServer passes the folder positionally; here the name comes first instead
  assert.match(s.log, /--enforce-eager is accepted for vLLM compatibility and ignored/);
  assert.equal((await s.stop()).code, 0);
  const named = await new Promise((resolve, reject) => {
    const p = execFile(bin, ['serve', 'Stories-Instruct', '--model', model('stories260K'), '--host', '127.0.0.1',
      '--port', '0', '--kv-cache-memory-bytes', '4M', '--disable-log-stats']);
    let log = '';
    p.stderr.on('data', async (d) => {
      log += d;
      const m = log.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && log.includes('Application startup complete')) {
        p.stderr.removeAllListeners('data');
        const models = await (await fetch(`http://127.0.0.1:${m[1]}/v1/models`)).json();
        p.kill('SIGTERM');
        p.on('exit', (code) => resolve({ log, models, code }));
      }
    });
    p.on('error', reject);
  });
  assert.match(named.log, /not a folder: serving --model .* under the name 'Stories-Instruct'/);
  assert.equal(named.models.data[0].id, 'Stories-Instruct');
  assert.equal(named.code, 0);
});

test('--uds serves over a Unix domain socket', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xinfer-uds-'));
  const sock = path.join(dir, 'xinfer.sock');
  const p = execFile(bin, ['serve', model('stories260K'), '--uds', sock, '--kv-cache-memory-bytes', '4M', '--disable-log-stats']);
  try {
    await new Promise((resolve) => {
      let log = '';
      p.stderr.on('data', (d) => { log += d; if (log.includes('Application startup complete')) resolve(); });
    });
    const out = await curl(['--unix-socket', sock, '-H', 'content-type: application/json', '-d',
      JSON.stringify({ prompt: 'Once', max_tokens: 3, temperature: 0 }), 'http://localhost/v1/completions']);
    const r = JSON.parse(out);
    assert.equal(r.usage.completion_tokens, 3);
  } finally {
    p.kill('SIGTERM');
    await new Promise((r) => p.on('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('--chat-template FILE replaces the model\'s template', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xinfer-tmpl-'));
  const file = path.join(dir, 't.jinja');
  fs.writeFileSync(file, "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}");
  const s = await startServer('stories260K', ['--chat-template', file]);
  try {
    const chat = await http(s, 'POST', '/tokenize', { body: { messages: [{ role: 'user', content: 'Once upon a time' }] } });
    assert.equal(chat.status, 200, chat.text);
    const plain = await http(s, 'POST', '/tokenize', { body: { prompt: 'user: Once upon a time\n', add_special_tokens: true } });
    assert.deepEqual(chat.json.tokens, plain.json.tokens);
  } finally {
    assert.equal((await s.stop()).code, 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
