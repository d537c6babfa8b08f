// web/markdown.js, the chat page's renderer, in Node: what model answers look like, and that
// no answer can put markup or script into the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { repoRoot } from '../e2e/lib/server.mjs';

const ctx = {};
vm.runInNewContext(fs.readFileSync(path.join(repoRoot, 'web/markdown.js'), 'utf8'), ctx);
const render = ctx.xiMarkdown.render;

test('fenced code keeps its text and language, even unclosed while streaming', () => {
  assert.equal(render('```python\nif a < b:\n    print("x")\n```'),
    '<pre><code class="language-python">if a &lt; b:\n    print(&quot;x&quot;)</code></pre>');
  assert.equal(render('Here:\n```\nx = 1'), '<p>Here:</p>\n<pre><code>x = 1</code></pre>');
  assert.equal(render('use `a **b** <c>` now'), '<p>use <code>a **b** &lt;c&gt;</code> now</p>');
});

test('headings, lists, quotes, tables, emphasis and links', () => {
  assert.equal(render('# Title\ntext **bold** and *it* and ~~no~~'),
    '<h1>Title</h1>\n<p>text <strong>bold</strong> and <em>it</em> and <del>no</del></p>');
  assert.equal(render('- one\n- two\n\n3. c\n4. d'), '<ul><li>one</li><li>two</li></ul>\n<ol start="3"><li>c</li><li>d</li></ol>');
  assert.equal(render('> said\n> twice'), '<blockquote><p>said<br>twice</p></blockquote>');
  assert.equal(render('| a | b |\n|---|--:|\n| 1 | 2 |'),
    '<table><thead><tr><th>a</th><th align="right">b</th></tr></thead><tbody><tr><td>1</td><td align="right">2</td></tr></tbody></table>');
  assert.equal(render('see [the docs](https://x.org/a?b=1&c=2)'),
    '<p>see <a href="https://x.org/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">the docs</a></p>');
  assert.equal(render('snake_case_name and 2*3*4'), '<p>snake_case_name and 2*3*4</p>');
  assert.equal(render('---'), '<hr>');
});

test('no answer can inject markup, handlers or script URLs', () => {
  const nasty = [
    '<script>alert(1)</script>', '<img src=x onerror=alert(1)>', '[x](javascript:alert(1))',
    '[x](JaVaScRiPt:alert(1))', '[x](data:text/html,<script>alert(1)</script>)', '**<b onmouseover=x>**',
    '```"><script>\n</code><script>x</script>\n```', '| <i> | b |\n|---|---|\n| <svg/onload=x> | c |',
    '[a](https://x.org/"onmouseover="x)', '# <iframe src=//x>', '> <style>*{}</style>', '`</code><script>`',
  ];
  for (const src of nasty) {
    const html = render(src);
    assert.doesNotMatch(html, /<(script|img|iframe|svg|style|i|b)[\s>/]/i, `${src} -> ${html}`);
    assert.doesNotMatch(html, /href="(javascript|data):/i, `${src} -> ${html}`);
    assert.doesNotMatch(html, /<[a-z]+[^>]*\son\w+\s*=/i, `${src} -> ${html}`);
  }
});
