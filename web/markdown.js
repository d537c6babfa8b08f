// A small Markdown renderer for model answers: fenced code, headings, lists, quotes, tables,
// rules, paragraphs, and inline code, bold, italics, strike-through and links. Every piece of
// text is HTML-escaped before any markup is added, and links keep only http(s), mailto and
// same-site targets, so an answer can never inject markup or script. An unclosed fence (an
// answer still streaming) renders as a code block up to the end.
'use strict';
(function () {
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const escape = (s) => s.replace(/[&<>"']/g, (c) => ESC[c]);

  function safeUrl(url) {
    const u = url.trim();
    if (/^(https?:|mailto:)/i.test(u) || /^[/#?.]/.test(u) || !/^[a-z][a-z0-9+.-]*:/i.test(u)) return u;
    return null;
  }

  // Inline markup of one escaped-later text run. Code spans are cut out first so nothing
  // inside them is touched; the rest is escaped, then marked up.
  function inline(text) {
    const parts = text.split(/(`+)([\s\S]*?[^`])\1(?!`)/);
    let out = '';
    for (let i = 0; i < parts.length; i += 3) {
      out += spans(parts[i]);
      if (i + 2 < parts.length) out += '<code>' + escape(parts[i + 2].replace(/^ (.*) $/, '$1')) + '</code>';
    }
    return out;
  }

  function spans(raw) {
    const links = [];
    raw = raw.replace(/\u0000/g, '');
    // [text](url): the text is marked up, the url checked; kept aside until the end
    let s = raw.replace(/\[([^\]\n]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g, (m, label, url) => {
      const u = safeUrl(url);
      links.push(u === null ? escape(label)
        : '<a href="' + escape(u) + '" target="_blank" rel="noopener noreferrer">' + emphasis(escape(label)) + '</a>');
      return '\u0000' + (links.length - 1) + '\u0000';
    });
    s = emphasis(escape(s));
    return s.replace(/\u0000(\d+)\u0000/g, (m, i) => links[Number(i)]);
  }

  function emphasis(s) {
    return s
      .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
      .replace(/__(?=\S)([\s\S]*?\S)__/g, '<strong>$1</strong>')
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>')
      .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?!\*)/g, '$1<em>$2</em>')
      .replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, '$1<em>$2</em>');
  }

  const splitRow = (line) => line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());

  function render(src) {
    const lines = String(src).replace(/\r\n?/g, '\n').split('\n');
    const out = [];
    let para = [];
    const flush = () => {
      if (para.length) out.push('<p>' + para.map(inline).join('<br>') + '</p>');
      para = [];
    };
    for (let i = 0; i < lines.length;) {
      const line = lines[i];
      let m;
      if ((m = line.match(/^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/))) {
        flush();
        const fence = m[1];
        const body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
        i++;
        const cls = m[2] ? ' class="language-' + escape(m[2]) + '"' : '';
        out.push('<pre><code' + cls + '>' + escape(body.join('\n')) + '</code></pre>');
        continue;
      }
      if (!line.trim()) { flush(); i++; continue; }
      if ((m = line.match(/^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/))) {
        flush();
        out.push('<h' + m[1].length + '>' + inline(m[2]) + '</h' + m[1].length + '>');
        i++;
        continue;
      }
      if (/^ {0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); out.push('<hr>'); i++; continue; }
      if (/^ {0,3}>/.test(line)) {
        flush();
        const body = [];
        for (; i < lines.length && /^ {0,3}>/.test(lines[i]); i++) body.push(lines[i].replace(/^ {0,3}> ?/, ''));
        out.push('<blockquote>' + render(body.join('\n')) + '</blockquote>');
        continue;
      }
      if (/^ {0,3}([-*+]|\d{1,9}[.)])\s+/.test(line)) {
        flush();
        const ordered = /^ {0,3}\d/.test(line);
        const item = ordered ? /^ {0,3}\d{1,9}[.)]\s+/ : /^ {0,3}[-*+]\s+/;
        const start = ordered ? parseInt(line, 10) : 1;
        const items = [];
        while (i < lines.length) {
          if (item.test(lines[i])) items.push([lines[i].replace(item, '')]);
          else if (/^\s{2,}\S/.test(lines[i]) && items.length) items[items.length - 1].push(lines[i].replace(/^\s{2,4}/, ''));
          else break;
          i++;
        }
        const tag = ordered ? 'ol' : 'ul';
        const attr = ordered && start !== 1 ? ' start="' + start + '"' : '';
        out.push('<' + tag + attr + '>' + items.map((it) => {
          const html = it.length > 1 ? render(it.join('\n')) : inline(it[0]);
          return '<li>' + html + '</li>';
        }).join('') + '</' + tag + '>');
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1])) {
        flush();
        const head = splitRow(line);
        const align = splitRow(lines[i + 1]).map((c) => (c.endsWith(':') ? (c.startsWith(':') ? 'center' : 'right') : ''));
        const cell = (tag, c, k) => '<' + tag + (align[k] ? ' align="' + align[k] + '"' : '') + '>' + inline(c) + '</' + tag + '>';
        let html = '<table><thead><tr>' + head.map((c, k) => cell('th', c, k)).join('') + '</tr></thead><tbody>';
        for (i += 2; i < lines.length && lines[i].includes('|') && lines[i].trim(); i++)
          html += '<tr>' + splitRow(lines[i]).map((c, k) => cell('td', c, k)).join('') + '</tr>';
        out.push(html + '</tbody></table>');
        continue;
      }
      para.push(line.trim());
      i++;
    }
    flush();
    return out.join('\n');
  }

  globalThis.xiMarkdown = { render, escape };
})();
