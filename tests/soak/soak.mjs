// Soak: SECONDS of mixed load against one `xinfer serve`, sampling its RSS and open file
// descriptors, then a verdict. The load: streams read to the end, streams dropped after two
// chunks, plain completions, clients that half-close after sending, and slow sockets that
// never finish their headers. Pass: every normal request answered, the server back to idle,
// its descriptors back to where they were, and its RSS after the load within 25 % (or 32 MB)
// of what it was once warm.
// Usage: node tests/soak/soak.mjs [--bin build/xinfer] [--model DIR] [--seconds 300]
//        [--concurrency 24]
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const bin = args.bin || 'build/xinfer';
const data = process.env.XINFER_TEST_DATA || '../shared/data';
const model = args.model || `${data}/models/stories260K`;
const seconds = Number(args.seconds || 300);
const concurrency = Number(args.concurrency || 24);
const READ_TIMEOUT_S = 3, SLOW_LIMIT_MS = (READ_TIMEOUT_S + 7) * 1000;

const srv = spawn(bin, ['serve', model, '--port', '0', '--host', '127.0.0.1', '--kv-cache-memory-bytes', '16M',
  '--served-model-name', 'soak', '--timeout-keep-alive', '2', '--timeout-request-read', String(READ_TIMEOUT_S), '--disable-log-stats'],
{ stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
const port = await new Promise((resolve, reject) => {
  srv.stderr.on('data', (d) => {
    log += d;
    const m = log.match(/Starting server on http:\/\/[^:]+:(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  srv.on('exit', (c) => reject(new Error(`server exited (${c}):\n${log}`)));
  setTimeout(() => reject(new Error(`no server after 60 s:\n${log}`)), 60000);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const agent = new http.Agent({ keepAlive: false, maxSockets: concurrency * 2 });
function request(path, body, { stream = false, dropAfter = 0 } = {}) {
  return new Promise((resolve) => {
    const data = body ? JSON.stringify(body) : undefined;
    const req = http.request({ host: '127.0.0.1', port, path, method: body ? 'POST' : 'GET', agent,
      headers: body ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {} }, (res) => {
      let text = '', chunks = 0;
      res.on('data', (d) => {
        text += d;
        if (stream && dropAfter && ++chunks >= dropAfter) { req.destroy(); resolve({ status: res.statusCode, dropped: true }); }
      });
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', () => resolve({ status: res.statusCode, dropped: true }));
    });
    req.on('error', (e) => resolve({ status: 0, error: e.message }));
    if (data) req.write(data);
    req.end();
  });
}

// A raw request whose client half-closes after sending: the answer must still come.
function halfClosed(body) {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const s = net.connect(port, '127.0.0.1', () => {
      s.end(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(data)}\r\n\r\n${data}`);
    });
    let raw = '';
    s.on('data', (d) => { raw += d; });
    s.on('close', () => { resolve(/HTTP\/1\.1 200 OK/.test(raw) && raw.includes('"finish_reason"')); });
    s.on('error', () => resolve(false));
  });
}

// A socket that sends a request line and then a header byte a second until the server cuts it
// (it must, --timeout-request-read after connecting); one still open SLOW_LIMIT_MS later is a
// failure, closed by us so the soak goes on.
function slowSocket() {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const t0 = Date.now();
    let timer, cutByUs = false;
    s.on('connect', () => {
      s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n');
      timer = setInterval(() => s.write('X'), 1000);
    });
    const guard = setTimeout(() => { cutByUs = true; s.destroy(); }, SLOW_LIMIT_MS);
    const done = () => {
      clearInterval(timer);
      clearTimeout(guard);
      if (cutByUs) fail(`slow socket still open after ${SLOW_LIMIT_MS / 1000} s`);
      resolve(Date.now() - t0);
    };
    s.on('close', done);
    s.on('error', () => {});
  });
}

const prompts = ['Once upon a time', 'The little dog', 'She looked at the sky and', 'Tom had a red ball', 'One day'];
const counts = { stream: 0, dropped: 0, plain: 0, halfclosed: 0, slow: 0, errors: 0 };
const failures = [];
let slowestCut = 0;
function fail(what) { counts.errors++; if (failures.length < 10) failures.push(what); }

async function worker(w, until) {
  let i = w;
  while (Date.now() < until) {
    const kind = i++ % 20;
    const prompt = prompts[i % prompts.length];
    const max_tokens = 8 + (i * 7) % 56;
    if (kind < 10) {
      const r = await request('/v1/completions', { model: 'soak', prompt, max_tokens, stream: true }, { stream: true });
      if (r.status !== 200 || !r.text.includes('data: [DONE]')) fail(`stream: ${r.status} ${r.error || ''}`);
      counts.stream++;
    } else if (kind < 14) {
      const r = await request('/v1/completions', { model: 'soak', prompt, max_tokens: 200, ignore_eos: true, stream: true }, { stream: true, dropAfter: 2 });
      if (r.status !== 200) fail(`dropped stream: ${r.status} ${r.error || ''}`);
      counts.dropped++;
    } else if (kind < 18) {
      const r = await request('/v1/completions', { model: 'soak', prompt, max_tokens });
      if (r.status !== 200 || !r.text.includes('"completion_tokens"')) fail(`plain: ${r.status} ${r.error || ''}`);
      counts.plain++;
    } else if (kind < 19) {
      if (!(await halfClosed({ model: 'soak', prompt, max_tokens: 8 }))) fail('half-closed client got no answer');
      counts.halfclosed++;
    } else {
      slowestCut = Math.max(slowestCut, await slowSocket());
      counts.slow++;
    }
  }
}

function sample() {
  const status = readFileSync(`/proc/${srv.pid}/status`, 'utf8');
  return { rss: Number(status.match(/VmRSS:\s+(\d+)/)[1]) / 1024, fds: readdirSync(`/proc/${srv.pid}/fd`).length };
}
async function metric(name) {
  const r = await request('/metrics');
  const m = (r.text || '').match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)`, 'm'));
  return m ? Number(m[1]) : NaN;
}

const t0 = Date.now(), until = t0 + seconds * 1000;
const before = sample();
const samples = [];
const sampler = setInterval(() => samples.push({ t: (Date.now() - t0) / 1000, ...sample() }), 1000);
await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w, until)));
clearInterval(sampler);
agent.destroy();
// back to idle: nothing running or waiting, then a moment for the watchdog's trim
let idle = false;
for (let k = 0; k < 100 && !idle; k++) {
  idle = (await metric('vllm:num_requests_running')) === 0 && (await metric('vllm:num_requests_waiting')) === 0;
  if (!idle) await sleep(100);
}
await sleep(1500);
const after = sample();
const warm = samples.find((s) => s.t >= Math.min(10, seconds / 5)) || samples[0] || before;
const peak = samples.reduce((m, s) => Math.max(m, s.rss), before.rss);
const rssOk = after.rss <= Math.max(warm.rss * 1.25, warm.rss + 32);
const fdsOk = after.fds <= before.fds + 4;
srv.kill('SIGTERM');
const code = await new Promise((r) => srv.on('exit', r));
const pass = counts.errors === 0 && idle && rssOk && fdsOk && code === 0;
console.log(`soak ${seconds} s, ${concurrency} clients: ${counts.stream} streams, ${counts.dropped} dropped, ${counts.plain} plain, ` +
  `${counts.halfclosed} half-closed, ${counts.slow} slow sockets (cut after at most ${(slowestCut / 1000).toFixed(1)} s), ${counts.errors} errors`);
console.log(`RSS MB: start ${before.rss.toFixed(0)}, warm ${warm.rss.toFixed(0)}, peak ${peak.toFixed(0)}, after ${after.rss.toFixed(0)}; ` +
  `fds: start ${before.fds}, peak ${samples.reduce((m, s) => Math.max(m, s.fds), before.fds)}, after ${after.fds}; idle ${idle}; exit ${code}`);
for (const f of failures) console.log(`  failure: ${f}`);
console.log(`verdict: ${pass ? 'PASS' : 'FAIL'}${rssOk ? '' : ' (RSS did not come back)'}${fdsOk ? '' : ' (descriptors leaked)'}`);
process.exit(pass ? 0 : 1);
