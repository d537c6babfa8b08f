// The engine dashboard: once a second it reads /webui/status (gauges, counters, how the engine
// is set up) and /metrics (vLLM's latency histograms), keeps the samples of the last 10
// minutes in memory, and derives rates, last-minute percentiles and the charts from them.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const POLL_MS = 1000, KEEP_S = 600, CHART_S = 300, RATE_S = 5, PCT_S = 60;
  const samples = [];                 // {t (s), st: status.stats, h: {ttft, itl, done}}
  let failures = 0;

  // ---- /metrics: the histograms and the finished-request counters -----------------------------

  // {ttft, itl: [[le, cumulative count], ...] sorted by le; done: {finished_reason: count}}
  function parseMetrics(text) {
    const h = { ttft: [], itl: [], done: {} };
    const hist = { 'vllm:time_to_first_token_seconds_bucket': 'ttft', 'vllm:inter_token_latency_seconds_bucket': 'itl' };
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const brace = line.indexOf('{'), sp = line.lastIndexOf(' ');
      const name = line.slice(0, brace < 0 ? sp : brace);
      const value = Number(line.slice(sp + 1));
      if (hist[name]) {
        const le = line.match(/le="([^"]+)"/);
        if (le) h[hist[name]].push([le[1] === '+Inf' ? Infinity : Number(le[1]), value]);
      } else if (name === 'vllm:request_success_total') {
        const r = line.match(/finished_reason="([^"]+)"/);
        if (r) h.done[r[1]] = value;
      }
    }
    h.ttft.sort((a, b) => a[0] - b[0]);
    h.itl.sort((a, b) => a[0] - b[0]);
    return h;
  }

  // The q-quantile of the observations between two snapshots of one cumulative histogram,
  // interpolated linearly inside its bucket (Prometheus' histogram_quantile).
  function quantile(q, now, then) {
    const cum = now.map(([le, c], i) => [le, c - (then?.[i]?.[1] ?? 0)]);
    const total = cum.length ? cum[cum.length - 1][1] : 0;
    if (total <= 0) return { n: 0, v: null };
    const rank = q * total;
    let prevLe = 0, prevC = 0;
    for (const [le, c] of cum) {
      if (c >= rank) {
        if (le === Infinity) return { n: total, v: prevLe };
        const v = c === prevC ? le : prevLe + (le - prevLe) * (rank - prevC) / (c - prevC);
        return { n: total, v };
      }
      prevLe = le; prevC = c;
    }
    return { n: total, v: prevLe };
  }

  // ---- formatting -----------------------------------------------------------------------------

  const fmt = (v, d = 0) => (v == null || !isFinite(v) ? '–' : v.toLocaleString(undefined, { maximumFractionDigits: d, minimumFractionDigits: d }));
  function fmtSec(s) {
    if (s == null) return '–';
    return s < 1 ? Math.round(s * 1000) + ' ms' : s.toFixed(2) + ' s';
  }
  function fmtBytes(b) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(i ? 1 : 0) + ' ' + u[i];
  }
  function fmtCount(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(2) + ' B';
    if (n >= 1e6) return (n / 1e6).toFixed(2) + ' M';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + ' K';
    return String(n);
  }
  const set = (id, text) => { const e = $(id); if (e.textContent !== text) e.textContent = text; };

  // ---- samples --------------------------------------------------------------------------------

  // The newest sample at least s seconds older than the last one (or the oldest there is).
  function before(s) {
    const last = samples[samples.length - 1];
    for (let i = samples.length - 1; i >= 0; i--) if (last.t - samples[i].t >= s) return samples[i];
    return samples[0];
  }
  function rate(field, a, b) {
    const dt = b.t - a.t;
    return dt > 0 ? (b.st[field] - a.st[field]) / dt : null;
  }

  function renderInfo(st) {
    const info = $('info');
    const e = st.engine;
    const items = [['model', st.model]];
    if (e) {
      items.push(['architecture', e.architecture], ['dtype', e.dtype], ['KV dtype', e.kv_cache_dtype],
        ['quantization', e.quantization], ['kernels', e.kernels], ['threads', String(e.threads)],
        ['parameters', fmtCount(e.n_params)], ['weights', fmtBytes(e.weight_bytes)],
        ['max_model_len', String(e.max_model_len)], ['max_num_seqs', String(e.max_num_seqs)],
        ['prefix caching', e.prefix_caching ? 'on' : 'off']);
    }
    if (st.reasoning_parser) items.push(['reasoning parser', st.reasoning_parser]);
    if (st.tool_parser) items.push(['tool parser', st.tool_parser]);
    items.push(['version', st.version]);
    const key = JSON.stringify(items);
    if (info.dataset.key === key) return;
    info.dataset.key = key;
    info.replaceChildren(...items.map(([k, v]) => {
      const span = document.createElement('span');
      const b = document.createElement('b');
      b.textContent = v;
      span.append(k + ' ', b);
      return span;
    }));
  }

  function renderNumbers(status) {
    const last = samples[samples.length - 1], st = last.st, e = status.engine;
    const r5 = before(RATE_S), m1 = before(PCT_S);
    set('running', String(st.running));
    set('running-sub', 'of max ' + e.max_num_seqs + ' · ' + st.in_flight + ' HTTP in flight');
    set('waiting', String(st.waiting));
    set('waiting-sub', 'in the queue');
    set('kv', fmt(st.kv_cache_usage * 100, 1) + ' %');
    set('kv-sub', st.kv_blocks_used + ' / ' + e.num_kv_blocks + ' blocks of ' + e.block_size + ' tokens · ' + fmtBytes(e.kv_cache_bytes));
    const dq = st.prefix_cache_queries - m1.st.prefix_cache_queries, dh = st.prefix_cache_hits - m1.st.prefix_cache_hits;
    set('hit', dq > 0 ? fmt(100 * dh / dq, 1) + ' %' : '–');
    set('hit-sub', 'last minute · all time ' + (st.prefix_cache_queries ? fmt(100 * st.prefix_cache_hits / st.prefix_cache_queries, 1) + ' %' : '–'));
    set('ptps', fmt(rate('prompt_tokens', r5, last), 1));
    set('ptps-sub', fmtCount(st.prompt_tokens) + ' prompt tokens in all');
    set('gtps', fmt(rate('generation_tokens', r5, last), 1));
    set('gtps-sub', fmtCount(st.generation_tokens) + ' generated in all');
    set('preempt', String(st.preemptions));
    set('preempt-sub', (st.preemptions - m1.st.preemptions) + ' in the last minute');
    const d = last.h.done, total = Object.values(d).reduce((a, b) => a + b, 0);
    set('done', fmtCount(total));
    set('done-sub', Object.entries(d).map(([k, v]) => k + ' ' + v).join(' · '));
    for (const [name, id] of [['ttft', 'ttft'], ['itl', 'itl']]) {
      for (const q of [50, 90, 99]) {
        const r = quantile(q / 100, last.h[name], m1 === last ? null : m1.h[name]);
        set(id + q, fmtSec(r.v));
        set(id + 'n', String(r.n));
      }
    }
    const span = last.t - m1.t;
    set('lat-note', span < PCT_S - 1 ? '(since this page opened, ' + Math.round(span) + ' s)' : '');
  }

  // ---- charts ---------------------------------------------------------------------------------

  const SVGNS = 'http://www.w3.org/2000/svg';
  function el(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }
  function axisLabel(v) {
    if (v >= 1e6) return +(v / 1e6).toFixed(1) + 'M';
    if (v >= 1e3) return +(v / 1e3).toFixed(1) + 'K';
    return String(+v.toFixed(2));
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // series: [{cls, points: [[t, v], ...]}]; time runs over the last CHART_S seconds.
  function chart(svg, series, fixedMax) {
    const W = svg.clientWidth || 400, H = svg.clientHeight || 150;
    const L = 40, R = 6, T = 8, B = 18;
    const now = samples[samples.length - 1].t;
    const max = fixedMax || niceMax(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
    const x = (t) => L + (W - L - R) * (1 - (now - t) / CHART_S);
    const y = (v) => T + (H - T - B) * (1 - v / max);
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    const kids = [];
    for (const f of [0, 0.5, 1]) {
      kids.push(el('line', { class: 'grid', x1: L, x2: W - R, y1: y(max * f), y2: y(max * f) }));
      kids.push(el('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end' }, axisLabel(max * f)));
    }
    for (const [t, label] of [[now - CHART_S, '-5 min'], [now - CHART_S / 2, '-2.5'], [now, 'now']])
      kids.push(el('text', { x: x(t), y: H - 4, 'text-anchor': t === now ? 'end' : t === now - CHART_S ? 'start' : 'middle' }, label));
    for (const s of series) {
      const pts = s.points.filter((p) => now - p[0] <= CHART_S && p[1] != null);
      if (pts.length) kids.push(el('polyline', { class: s.cls, points: pts.map((p) => x(p[0]).toFixed(1) + ',' + y(Math.min(p[1], max)).toFixed(1)).join(' ') }));
    }
    svg.replaceChildren(...kids);
  }

  function renderCharts() {
    const pts = (f) => samples.map((s) => [s.t, f(s)]);
    chart($('chart-req'), [{ cls: 's1', points: pts((s) => s.st.running) }, { cls: 's2', points: pts((s) => s.st.waiting) }]);
    const rateAt = (field) => samples.map((s, i) => {
      let j = i;
      while (j > 0 && s.t - samples[j].t < RATE_S) j--;
      return [s.t, j === i ? null : (s.st[field] - samples[j].st[field]) / (s.t - samples[j].t)];
    });
    chart($('chart-tps'), [{ cls: 's1', points: rateAt('generation_tokens') }, { cls: 's2', points: rateAt('prompt_tokens') }]);
    chart($('chart-kv'), [{ cls: 's3', points: pts((s) => 100 * s.st.kv_cache_usage) }], 100);
  }

  // ---- polling --------------------------------------------------------------------------------

  function setState(text, ok) {
    const s = $('state');
    s.textContent = text;
    s.className = 'state ' + (ok ? 'ok' : 'bad');
  }

  async function poll() {
    try {
      const [sr, mr] = await Promise.all([fetch('/webui/status', { cache: 'no-store' }), fetch('/metrics', { cache: 'no-store' })]);
      if (!sr.ok) throw new Error('/webui/status: HTTP ' + sr.status);
      const status = await sr.json();
      renderInfo(status);
      if (status.loading) { setState('loading the model…', false); return; }
      const h = mr.ok ? parseMetrics(await mr.text()) : { ttft: [], itl: [], done: {} };
      const t = performance.now() / 1000;
      samples.push({ t, st: status.stats, h });
      while (samples.length && t - samples[0].t > KEEP_S) samples.shift();
      failures = 0;
      setState('live · up ' + Math.floor(status.uptime_s / 60) + ' min', true);
      renderNumbers(status);
      renderCharts();
    } catch (e) {
      failures++;
      setState('server unreachable' + (failures > 1 ? ' (' + failures + ' tries)' : ''), false);
    }
  }

  async function loop() {
    const t0 = performance.now();
    await poll();
    setTimeout(loop, Math.max(0, POLL_MS - (performance.now() - t0)));
  }
  window.addEventListener('resize', () => { if (samples.length) renderCharts(); });
  loop();
})();
