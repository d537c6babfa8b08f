// Start `xinfer serve` on a free loopback port and talk to it. The binary is XINFER_BIN
// (default build/xinfer; CI also passes build-asan/xinfer), the models come from
// XINFER_TEST_DATA (default ../shared/data next to the repository).
import { spawn, execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const bin = path.resolve(repoRoot, process.env.XINFER_BIN || 'build/xinfer');
export const dataDir = path.resolve(repoRoot, process.env.XINFER_TEST_DATA || '../shared/data');
export const model = (name) => path.join(dataDir, 'models', name);

// Start a server; resolves once it logs "Application startup complete".
export function startServer(modelName, extraArgs = [], { env = {}, timeoutMs = 60000 } = {}) {
  const args = ['serve', model(modelName), '--host', '127.0.0.1', '--port', '0',
    '--kv-cache-memory-bytes', '8M', '--threads', '1', '--disable-log-stats', ...extraArgs];
  const proc = spawn(bin, args, {
    env: { ...process.env, ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms:\n${log}`));
    }, timeoutMs);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/Starting server on http:\/\/([\d.]+):(\d+)/);
      if (m && log.includes('Application startup complete')) {
        clearTimeout(timer);
        proc.stderr.off('data', onData);
        proc.stderr.on('data', (d2) => { server.log += d2.toString(); });
        const server = {
          proc, log, port: Number(m[2]), base: `http://127.0.0.1:${m[2]}`, exited,
          // SIGTERM and wait: resolves to the exit status
          async stop(signal = 'SIGTERM') {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
            return exited;
          },
        };
        resolve(server);
      }
    };
    proc.stderr.on('data', onData);
    proc.stdout.on('data', (d) => { log += d.toString(); });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before start:\n${log}`));
    });
  });
}

// Plain HTTP helper returning {status, headers, text, json}.
export async function http(server, method, route, { body, headers = {}, raw } = {}) {
  const res = await fetch(server.base + route, {
    method,
    headers: { ...(body !== undefined && !raw ? { 'content-type': 'application/json' } : {}), ...headers },
    body: raw !== undefined ? raw : body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}

// Run curl; resolves to stdout (curl must exit 0).
export function curl(args) {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '-m', '60', ...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`curl ${args.join(' ')}: ${err.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

// Prometheus text → {"name{labels}": value}
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

export async function metric(server, name, labels = '') {
  const r = await http(server, 'GET', '/metrics');
  const m = parseMetrics(r.text);
  const key = Object.keys(m).find((k) => k.startsWith(name + '{') && k.includes(labels));
  return key === undefined ? undefined : m[key];
}

// Poll until fn() is truthy (e.g. metrics settling after aborts).
export async function eventually(fn, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  return last;
}
