"""A library failing on one page's markup, for the tests of what a crawl does then."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def converter_failing_on(marker: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """The markdown converter raising on any markup that holds *marker* (the next
    refusal of a library, a parser's bug); returns the real one."""
    from increcrawl_scrapy.content import page_text as module

    convert: Callable[..., str] = module.html_to_markdown

    def failing(html: str | bytes) -> str:
        if marker in str(html):
            raise RuntimeError("a converter's fault")
        return convert(html)

    monkeypatch.setattr(module, "html_to_markdown", failing)
    return convert
