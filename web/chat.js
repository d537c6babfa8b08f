// The chat page: conversations kept in localStorage, answers streamed from this server's
// /v1/chat/completions (the same OpenAI API any client uses), rendered as Markdown with the
// reasoning folded and tool calls shown as calls. Stop aborts the fetch, and the server
// aborts the request when its connection closes.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const md = globalThis.xiMarkdown;
  const STORE = 'xinfer.conversations', SETTINGS = 'xinfer.settings', KEY = 'xinfer.apiKey';

  let convs = load(STORE, []);
  let settings = load(SETTINGS, { system: '', temperature: '', top_p: '', max_tokens: '', json_mode: false });
  let current = null;            // the conversation shown
  let running = null;            // {ctrl, conv, msg} while an answer streams
  let editing = -1;              // index of the user message being edited

  function load(key, dflt) {
    try { const v = JSON.parse(localStorage.getItem(key)); return v ?? dflt; } catch { return dflt; }
  }
  function save() {
    try { localStorage.setItem(STORE, JSON.stringify(convs)); } catch (e) { showError('cannot save conversations: ' + e.message); }
  }
  const newId = () => Date.now().toString(36) + Math.random().toString(36).slice(2, 8);

  function showError(text) {
    $('error').textContent = text;
    $('error').hidden = !text;
  }

  function headers() {
    const h = { 'content-type': 'application/json' };
    const key = localStorage.getItem(KEY);
    if (key) h.authorization = 'Bearer ' + key;
    return h;
  }

  // ---- server: models, whether a key is needed ------------------------------------------------

  async function loadModels() {
    try {
      const st = await (await fetch('/webui/status')).json();
      $('key-field').hidden = !st.api_key_required;
    } catch { /* the status is a convenience; /v1/models says the rest */ }
    const r = await fetch('/v1/models', { headers: headers() }).catch((e) => ({ ok: false, status: 0, e }));
    if (!r.ok) {
      if (r.status === 401) {
        $('key-field').hidden = false;
        openSettings(true);
        showError('This server needs an API key: enter it in Settings.');
      } else if (r.status === 503) {
        showError('The model is still loading…');
        setTimeout(loadModels, 2000);
      } else showError('Cannot list models: ' + (r.status ? 'HTTP ' + r.status : r.e.message));
      return;
    }
    const list = (await r.json()).data || [];
    const sel = $('model');
    sel.replaceChildren(...list.map((m) => new Option(m.id, m.id)));
    if (list.some((m) => m.id === settings.model)) sel.value = settings.model;
    showError('');
  }

  // ---- conversations --------------------------------------------------------------------------

  function renderList() {
    const ul = $('conversations');
    ul.replaceChildren(...convs.map((c) => {
      const li = document.createElement('li');
      li.className = c === current ? 'active' : '';
      li.dataset.id = c.id;
      const span = document.createElement('span');
      span.textContent = c.title || 'New chat';
      span.title = new Date(c.updated).toLocaleString();
      const del = document.createElement('button');
      del.className = 'link';
      del.textContent = '✕';
      del.title = 'Delete this conversation';
      del.setAttribute('aria-label', 'Delete');
      del.onclick = (ev) => { ev.stopPropagation(); remove(c); };
      li.append(span, del);
      li.onclick = () => { select(c); $('sidebar').classList.remove('open'); };
      return li;
    }));
  }

  function select(c) {
    current = c;
    editing = -1;
    renderList();
    renderMessages();
  }

  function remove(c) {
    if (running && running.conv === c) stop();
    convs = convs.filter((x) => x !== c);
    save();
    select(convs[0] || null);
  }

  function newConversation() {
    const c = { id: newId(), title: '', created: Date.now(), updated: Date.now(), messages: [] };
    convs.unshift(c);
    return c;
  }

  // ---- messages -------------------------------------------------------------------------------

  function button(label, title, fn) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'link';
    b.textContent = label;
    b.title = title;
    b.onclick = fn;
    return b;
  }

  function statsText(s) {
    if (!s) return '';
    const parts = [];
    if (s.tokens != null) parts.push(s.tokens + ' tokens');
    if (s.tps != null) parts.push(s.tps.toFixed(1) + ' tok/s');
    if (s.ttft_ms != null) parts.push('TTFT ' + Math.round(s.ttft_ms) + ' ms');
    if (s.finish) parts.push(s.finish);
    return parts.join(' · ');
  }

  function bubbleHtml(m, live) {
    let html = '';
    if (m.reasoning) html += '<details class="reasoning"' + (live && !m.content ? ' open' : '') + '><summary>Reasoning</summary><div>' + md.escape(m.reasoning) + '</div></details>';
    html += md.render(m.content || '');
    for (const t of m.tool_calls || []) {
      let args = t.function.arguments || '';
      try { args = JSON.stringify(JSON.parse(args), null, 2); } catch { /* shown as it came */ }
      html += '<div class="tool-call">call <b>' + md.escape(t.function.name || '?') + '</b><pre><code>' + md.escape(args) + '</code></pre></div>';
    }
    return html;
  }

  function messageNode(m, i) {
    const div = document.createElement('div');
    div.className = 'msg ' + m.role + (m.error ? ' error' : '');
    const bubble = document.createElement('div');
    bubble.className = 'bubble';
    const meta = document.createElement('div');
    meta.className = 'meta';
    const isLive = running && running.msg === m;
    if (m.role === 'user' && editing === i) {
      div.classList.add('edit');
      const ta = document.createElement('textarea');
      ta.value = m.content;
      bubble.append(ta);
      meta.append(button('Save & send', 'Replace this message and answer again', () => resend(i, ta.value)),
        button('Cancel', 'Keep the message as it was', () => { editing = -1; renderMessages(); }));
      queueMicrotask(() => ta.focus());
    } else if (m.role === 'user') {
      bubble.textContent = m.content;
      if (!running) meta.append(button('Edit', 'Edit this message and send it again', () => { editing = i; renderMessages(); }));
    } else if (m.error) {
      bubble.textContent = m.error;
    } else {
      bubble.innerHTML = bubbleHtml(m, isLive);
      if (isLive) bubble.classList.add('cursor');
    }
    if (m.role === 'assistant') {
      const st = document.createElement('span');
      st.className = 'stats';
      st.textContent = statsText(m.stats);
      meta.append(st);
      if (!running && i === current.messages.length - 1)
        meta.append(button('Regenerate', 'Answer the last message again', regenerate));
      if (!m.error && m.content) meta.append(button('Copy', 'Copy the answer', () => navigator.clipboard?.writeText(m.content)));
    }
    div.append(bubble, meta);
    return div;
  }

  function renderMessages() {
    const box = $('messages');
    if (!current || !current.messages.length) {
      const p = document.createElement('p');
      p.className = 'empty';
      p.textContent = 'Send a message to start. Answers stream from this server’s /v1/chat/completions.';
      box.replaceChildren(p);
      return;
    }
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    box.replaceChildren(...current.messages.map(messageNode));
    if (atBottom || running) box.scrollTop = box.scrollHeight;
  }

  // Re-render only the streaming message, at most once per frame.
  let frame = 0;
  function renderLive() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      if (!running || running.conv !== current) return;
      const box = $('messages');
      const i = current.messages.indexOf(running.msg);
      const old = box.children[i];
      if (old) old.replaceWith(messageNode(running.msg, i));
      box.scrollTop = box.scrollHeight;
    });
  }

  // ---- one answer -----------------------------------------------------------------------------

  function requestBody(conv) {
    const messages = [];
    if (settings.system.trim()) messages.push({ role: 'system', content: settings.system });
    for (const m of conv.messages) {
      if (m.error || m === running?.msg) continue;
      const o = { role: m.role, content: m.content || '' };
      if (m.tool_calls?.length) o.tool_calls = m.tool_calls;
      messages.push(o);
    }
    const body = { model: $('model').value, messages, stream: true, stream_options: { include_usage: true } };
    for (const k of ['temperature', 'top_p']) if (settings[k] !== '') body[k] = Number(settings[k]);
    if (settings.max_tokens !== '') body.max_tokens = Number(settings.max_tokens);
    if (settings.json_mode) body.response_format = { type: 'json_object' };
    return body;
  }

  // The answer's text, reasoning and tool calls from one SSE chunk.
  function applyChunk(m, chunk) {
    if (chunk.usage) m.stats.tokens = chunk.usage.completion_tokens;
    const c = chunk.choices?.[0];
    if (!c) return false;
    const d = c.delta || {};
    let got = false;
    if (d.content) { m.content += d.content; got = true; }
    if (d.reasoning_content) { m.reasoning = (m.reasoning || '') + d.reasoning_content; got = true; }
    for (const t of d.tool_calls || []) {
      m.tool_calls = m.tool_calls || [];
      const k = t.index ?? m.tool_calls.length;
      const call = m.tool_calls[k] || (m.tool_calls[k] = { id: t.id, type: 'function', function: { name: '', arguments: '' } });
      if (t.id) call.id = t.id;
      if (t.function?.name) call.function.name += t.function.name;
      if (t.function?.arguments) call.function.arguments += t.function.arguments;
      got = true;
    }
    if (c.finish_reason) m.stats.finish = c.finish_reason;
    return got;
  }

  async function answer(conv) {
    showError('');
    const m = { role: 'assistant', content: '', stats: {} };
    conv.messages.push(m);
    const ctrl = new AbortController();
    running = { ctrl, conv, msg: m };
    setBusy(true);
    renderMessages();
    const t0 = performance.now();
    let tFirst = null, tLast = null;
    try {
      const res = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(requestBody(conv)), signal: ctrl.signal });
      if (!res.ok) {
        const text = await res.text();
        let msg;
        try { msg = JSON.parse(text).error.message; } catch { msg = text; }
        throw new Error('HTTP ' + res.status + ': ' + msg);
      }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '', done = false, lastSave = 0;
      while (!done) {
        const r = await reader.read();
        if (r.done) break;
        buf += dec.decode(r.value, { stream: true });
        let k;
        while ((k = buf.search(/\r?\n\r?\n/)) >= 0) {
          const event = buf.slice(0, k);
          buf = buf.slice(k).replace(/^\r?\n\r?\n/, '');
          for (const line of event.split(/\r?\n/)) {
            if (!line.startsWith('data:')) continue;
            const data = line.slice(5).trim();
            if (data === '[DONE]') { done = true; break; }
            const chunk = JSON.parse(data);
            if (chunk.error) throw new Error(chunk.error.message);
            if (applyChunk(m, chunk)) {
              const now = performance.now();
              if (tFirst === null) tFirst = now;
              tLast = now;
            }
          }
        }
        renderLive();
        if (performance.now() - lastSave > 1000) { save(); lastSave = performance.now(); }
      }
    } catch (e) {
      if (e.name === 'AbortError') m.stats.finish = 'stopped';
      else if (!m.content && !m.reasoning) { m.error = e.message; delete m.stats; }
      else m.stats.finish = 'error: ' + e.message;
    }
    if (m.stats) {
      if (tFirst !== null) m.stats.ttft_ms = tFirst - t0;
      // Decode speed as this browser saw it: the tokens after the first over the time after
      // the first. When the server was faster than the connection and the whole answer came
      // in a burst, that time means nothing; then the whole request's time is used.
      const n = m.stats.tokens;
      if (n > 1 && tLast - tFirst >= 50) m.stats.tps = (n - 1) / ((tLast - tFirst) / 1000);
      else if (n > 0 && tLast > t0) m.stats.tps = n / ((tLast - t0) / 1000);
    }
    running = null;
    conv.updated = Date.now();
    save();
    setBusy(false);
    if (conv === current) renderMessages();
    renderList();
  }

  function setBusy(busy) {
    $('send').hidden = busy;
    $('stop').hidden = !busy;
  }

  function stop() {
    if (running) running.ctrl.abort();
  }

  function send(text) {
    if (running || !text.trim()) return;
    if (!current) current = newConversation();
    current.messages.push({ role: 'user', content: text });
    if (!current.title) current.title = text.trim().split('\n')[0].slice(0, 60);
    current.updated = Date.now();
    save();
    renderList();
    answer(current);
  }

  function resend(i, text) {
    if (running || !text.trim()) return;
    editing = -1;
    current.messages.splice(i);
    send(text);
  }

  function regenerate() {
    if (running || !current) return;
    const msgs = current.messages;
    if (msgs.length && msgs[msgs.length - 1].role === 'assistant') msgs.pop();
    if (!msgs.length) return;
    answer(current);
  }

  // ---- export / import ------------------------------------------------------------------------

  function exportAll() {
    const blob = new Blob([JSON.stringify({ xinfer_conversations: 1, conversations: convs }, null, 2)], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'xinfer-conversations-' + new Date().toISOString().slice(0, 10) + '.json';
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  function validConversation(c) {
    return c && typeof c === 'object' && Array.isArray(c.messages) &&
      c.messages.every((m) => m && ['user', 'assistant', 'system', 'tool'].includes(m.role) && (m.content == null || typeof m.content === 'string'));
  }

  async function importFile(file) {
    try {
      const data = JSON.parse(await file.text());
      const list = Array.isArray(data) ? data : data.conversations;
      if (!Array.isArray(list) || !list.every(validConversation)) throw new Error('not an export of xinfer conversations');
      const ids = new Set(convs.map((c) => c.id));
      for (const c of list) {
        if (!c.id || ids.has(c.id)) c.id = newId();
        c.title = String(c.title || c.messages.find((m) => m.role === 'user')?.content.slice(0, 60) || 'Imported');
        c.updated = Number(c.updated) || Date.now();
        convs.push(c);
      }
      convs.sort((a, b) => b.updated - a.updated);
      save();
      select(list[0] || current);
      showError('');
    } catch (e) {
      showError('Import failed: ' + e.message);
    }
  }

  // ---- settings -------------------------------------------------------------------------------

  function openSettings(open) {
    $('settings').hidden = !open;
    $('settings-btn').setAttribute('aria-expanded', String(open));
  }

  function bindSettings() {
    for (const k of ['system', 'temperature', 'top_p', 'max_tokens']) {
      $(k).value = settings[k] ?? '';
      $(k).oninput = () => { settings[k] = $(k).value; localStorage.setItem(SETTINGS, JSON.stringify(settings)); };
    }
    $('json_mode').checked = !!settings.json_mode;
    $('json_mode').onchange = () => { settings.json_mode = $('json_mode').checked; localStorage.setItem(SETTINGS, JSON.stringify(settings)); };
    $('api_key').value = localStorage.getItem(KEY) || '';
    $('api_key').onchange = () => { localStorage.setItem(KEY, $('api_key').value.trim()); loadModels(); };
    $('model').onchange = () => { settings.model = $('model').value; localStorage.setItem(SETTINGS, JSON.stringify(settings)); };
  }

  // ---- start ----------------------------------------------------------------------------------

  $('composer').onsubmit = (ev) => {
    ev.preventDefault();
    const text = $('input').value;
    if (running || !text.trim()) return;
    $('input').value = '';
    send(text);
  };
  $('input').onkeydown = (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); $('composer').requestSubmit(); }
  };
  $('stop').onclick = stop;
  $('new-chat').onclick = () => { if (!running) { current = null; editing = -1; renderList(); renderMessages(); $('input').focus(); } $('sidebar').classList.remove('open'); };
  $('export').onclick = exportAll;
  $('import').onchange = (ev) => { if (ev.target.files[0]) importFile(ev.target.files[0]); ev.target.value = ''; };
  $('settings-btn').onclick = () => openSettings($('settings').hidden);
  $('menu').onclick = (ev) => { ev.stopPropagation(); $('sidebar').classList.toggle('open'); };
  // on a phone the conversation list lies over the page: a tap beside it closes it
  $('messages').addEventListener('click', () => $('sidebar').classList.remove('open'));
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && running) stop(); });
  bindSettings();
  convs.sort((a, b) => b.updated - a.updated);
  select(convs[0] || null);
  loadModels();
})();
