"""Sample pages whose markdown decides whether the markdown converter's version moves
the text scheme (``ContentOptions.scheme``).

An upgrade of html-to-markdown that changes no page's text needs no new baselines;
naming its version in the scheme made every such upgrade re-read every page whole.
Measured over 409 real pages of 8 generators (``benchmarks/scheme_versions.py``), its
minor versions 3.19 to 3.21 changed the text of none; trafilatura's each changed some
(5 to 94), so its version stays in the scheme. These samples hold the constructs of
documentation and blog pages as generators write them (MkDocs Material, Sphinx,
rustdoc, WordPress): a converter that writes any of them otherwise moves the scheme.
"""

# The samples are markup as generators write it: long lines, typographic characters.
# ruff: noqa: E501, RUF001

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

SAMPLES = (
    # MkDocs Material: headings with permalinks, an admonition, code with a language,
    # a table with alignment, nested lists, keyboard keys, a details block.
    """<article class="md-content__inner md-typeset">
<h1 id="install">Installation<a class="headerlink" href="#install" title="Permanent link">&para;</a></h1>
<p>Install it with <code>pip</code>, then run <kbd>Ctrl</kbd>+<kbd>C</kbd> to stop &mdash; see
<a href="../usage/">Usage</a> and <em>the</em> <strong>settings</strong>.</p>
<div class="admonition note"><p class="admonition-title">Note</p><p>Python&nbsp;3.11 or later.</p></div>
<pre><code class="language-bash">pip install example
example --version   # prints 1.2
</code></pre>
<table><thead><tr><th align="left">Option</th><th align="center">Default</th><th align="right">Since</th></tr></thead>
<tbody><tr><td align="left"><code>depth</code></td><td align="center">3</td><td align="right">1.0</td></tr>
<tr><td align="left"><code>delay</code></td><td align="center">0.5&nbsp;s</td><td align="right">1.1</td></tr></tbody></table>
<ul><li>First<ul><li>nested <a href="https://example.org/a?b=1&amp;c=2">link</a></li><li>second</li></ul></li>
<li><p>Loose item</p><p>with two paragraphs</p></li></ul>
<ol start="3"><li>three</li><li>four</li></ol>
<details><summary>More</summary><p>Hidden text.</p></details>
<h2 id="next">Next steps</h2><p>Line one<br>line two. H<sub>2</sub>O, x<sup>2</sup>.</p>
<blockquote><p>A quoted <abbr title="HyperText Markup Language">HTML</abbr> line.</p></blockquote>
<hr><p><img alt="Diagram of the flow" src="img/flow.png" title="Flow"></p>
</article>""",
    # Sphinx: sections, a definition list, a literal block, a field list, a footnote.
    """<div class="body" role="main"><section id="api">
<h1>API<a class="headerlink" href="#api" title="Link to this heading">¶</a></h1>
<dl class="py function"><dt class="sig sig-object py" id="mod.fetch">
<span class="sig-name descname"><span class="pre">fetch</span></span><span class="sig-paren">(</span>
<em class="sig-param"><span class="n">url</span></em>, <em class="sig-param"><span class="n">timeout</span>
<span class="o">=</span><span class="default_value">10</span></em><span class="sig-paren">)</span></dt>
<dd><p>Fetch <em>url</em>.</p><dl class="field-list simple"><dt class="field-odd">Parameters<span class="colon">:</span></dt>
<dd class="field-odd"><ul class="simple"><li><p><strong>url</strong> – the address.</p></li></ul></dd></dl></dd></dl>
<div class="highlight-python notranslate"><div class="highlight"><pre><span></span><span class="kn">import</span> <span class="nn">mod</span>
<span class="n">mod</span><span class="o">.</span><span class="n">fetch</span><span class="p">(</span><span class="s2">&quot;https://example.org&quot;</span><span class="p">)</span>
</pre></div></div>
<p>See the note<a class="footnote-reference brackets" href="#f1" id="id1" role="doc-noteref">1</a> &amp; <cite>the guide</cite>.</p>
<aside class="footnote brackets" id="f1" role="doc-footnote"><span class="label">1</span><p>A footnote.</p></aside>
</section></div>""",
    # rustdoc and a WordPress post: a declaration, code inline in links, a figure,
    # a caption, a table without a head, entities and typographic quotes.
    """<main><section id="main-content" class="content"><div class="main-heading">
<h1>Struct <a class="mod" href="../index.html">std</a>::<a class="struct" href="#">Vec</a></h1></div>
<pre class="rust item-decl"><code>pub struct Vec&lt;T, A: <a href="../alloc/trait.Allocator.html">Allocator</a> = Global&gt; { /* private fields */ }</code></pre>
<details class="toggle top-doc" open><summary class="hideme"><span>Expand description</span></summary>
<div class="docblock"><p>A contiguous growable array type, written as <code>Vec&lt;T&gt;</code>.</p>
<h2 id="examples"><a class="doc-anchor" href="#examples">§</a>Examples</h2>
<div class="example-wrap"><pre class="rust rust-example-rendered"><code><span class="kw">let </span><span class="kw-2">mut </span>vec = Vec::new();
vec.push(<span class="number">1</span>);</code></pre></div></div></details></section>
<article class="post"><h2 class="entry-title">“Hello” — it’s a post…</h2>
<figure class="wp-block-image"><img src="/a.jpg" alt="A cat"><figcaption>A cat, © 2024</figcaption></figure>
<table><tr><td>Price</td><td>€12.50</td></tr><tr><td>Stock</td><td>3 left</td></tr></table>
<p>Tags: <a rel="tag" href="/t/x">x</a>, <a rel="tag" href="/t/y">y</a></p></article></main>""",
)


@functools.lru_cache(maxsize=4)
def samples_digest(convert: Callable[[str], str]) -> str:
    """A digest of the samples' markdown as *convert* writes it (a few milliseconds,
    once a process)."""
    digest = hashlib.sha256()
    for sample in SAMPLES:
        digest.update(convert(sample).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]
