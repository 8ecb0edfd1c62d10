"""The quotes site's other shapes, as quotes.toscrape.com has them: its JSON API
(``/api/quotes?page=N``), its pages rendered by JavaScript (``/js/page/N/``), a
login form (``/login``, a CSRF token, a session cookie), and, as ASP.NET sites page
their grids, a listing paged by postbacks (``/grid``: page 2 and on only by a POST
of its form to the same URL). Each author has a portrait (``/img/SLUG.png``)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

Quote = dict[str, object]


def slug(author: object) -> str:
    return str(author).lower().replace(" ", "-")


def api_json(shown: Sequence[Quote], page: int, has_next: bool) -> str:
    quotes = [
        {
            "author": {"name": q["author"], "slug": slug(q["author"])},
            "tags": q["tags"],
            "text": q["text"],
        }
        for q in shown
    ]
    return json.dumps({"has_next": has_next, "page": page, "quotes": quotes, "tag": None})


def js_html(shown: Sequence[Quote], page: int, has_next: bool) -> str:
    """The quotes in a script that writes them into the page, as /js/ does."""
    data = json.dumps(
        [{"text": q["text"], "author": {"name": q["author"]}, "tags": q["tags"]} for q in shown]
    ).replace("</", "<\\/")
    pager = f'<li class="next"><a href="/js/page/{page + 1}/">Next</a></li>' if has_next else ""
    script = (
        f"var data = {data};\n"
        "for (var i in data) { var d = data[i]; var tags = '';"
        " for (var t in d.tags) { tags += '<a class=\"tag\">' + d.tags[t] + '</a>'; }"
        ' document.write(\'<div class="quote"><span class="text"></span>'
        '<span>by <small class="author"></small></span><div class="tags">Tags: \''
        " + tags + '</div></div>');"
        " var q = document.querySelectorAll('div.quote'); var last = q[q.length - 1];"
        " last.querySelector('.text').textContent = d.text;"
        " last.querySelector('.author').textContent = d.author.name; }"
    )
    return (
        "<!doctype html><html><head><title>Quotes</title></head><body>"
        f'<div class="header"><a href="/js/">Quotes to Scrape</a></div><div class="container">'
        f'<script>{script}</script></div><nav><ul class="pager">{pager}</ul></nav></body></html>'
    )


def grid_html(shown: Sequence[Quote], page: int, has_next: bool, state: str) -> str:
    """A page of the grid; *state* is the form's ``__VIEWSTATE``."""
    rows = "".join(
        f'<tr class="quote"><td class="text">{escape(str(q["text"]))}</td>'
        f'<td class="author">{escape(str(q["author"]))}</td>'
        f'<td class="tags">{escape(", ".join(map(str, q["tags"])))}</td></tr>'  # type: ignore[call-overload]
        for q in shown
    )
    pager = (
        f"<a class=\"next\" href=\"javascript:__doPostBack('grid','Page${page + 1}')\" "
        f'data-arg="Page${page + 1}">Next</a>'
        if has_next
        else ""
    )
    return (
        '<!doctype html><html><body><form id="grid" method="post" action="/grid">'
        f'<input type="hidden" name="__VIEWSTATE" value={quoteattr(state)}>'
        '<input type="hidden" name="__EVENTTARGET" value="">'
        '<input type="hidden" name="__EVENTARGUMENT" value="">'
        f"<main><h1>Quotes, page {page}</h1><table>{rows}</table>{pager}</main>"
        "</form></body></html>"
    )


def login_html(token: str) -> str:
    return (
        "<!doctype html><html><body><main><h1>Login</h1>"
        '<form action="/login" method="post">'
        f'<input type="hidden" name="csrf_token" value="{token}">'
        '<input type="text" name="username"><input type="password" name="password">'
        '<input type="submit" value="Login"></form></main></body></html>'
    )


def png(seed: int) -> bytes:
    """A real 2x2 PNG, its colour from *seed*."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    pixel = bytes(((seed * 67) % 256, (seed * 31) % 256, 128))
    raw = b"".join(b"\x00" + pixel * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
