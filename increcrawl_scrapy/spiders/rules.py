"""Your own callbacks with our scheduling: subclass ``IncrementalSpider`` the way
``SitemapSpider`` is subclassed, with ``page_rules = [(regex, callback), ...]``.

Discovery, the queue and recording stay ours; a due page whose URL matches a rule
is handed to its callback (the first rule that matches wins), which yields your
items (each with the page's URL in ``INCRECRAWL_URL_FIELD``: that is how its state
is kept) and requests. 304, 404/410 and failures stay ours. The page's validators
are kept for the next conditional fetch whatever the callback yields.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item

from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.crawl.validators import header_of

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response

logger = logging.getLogger(__name__)


def compile_rules(
    spider: Spider, rules: Sequence[tuple[str, str | Callable[..., Any]]]
) -> list[tuple[re.Pattern[str], Callable[..., Any]]]:
    compiled = []
    for regex, callback in rules:
        method = getattr(spider, callback) if isinstance(callback, str) else callback
        compiled.append((re.compile(regex), method))
    return compiled


def routed(
    spider: Any, callback: Callable[..., Any], response: Response, url: str
) -> Iterator[Any]:
    """The callback's output; warns (once) when it yields no item for the page."""
    etag, modified = header_of(response, "ETag"), header_of(response, "Last-Modified")
    if (etag or modified) and "geonode" not in response.flags:
        crawl_state(spider.crawler).validators[url] = (etag, modified)
    field = spider.config.url_field
    recorded = False
    for output in callback(response) or ():
        if is_item(output) and ItemAdapter(output).get(field):
            recorded = True
        yield output
    if not recorded and not getattr(spider, "_warned_no_item", False):
        spider._warned_no_item = True
        logger.warning(
            "%s: the callback yielded no item with %r: the page's schedule cannot move, "
            "so it stays due (yield at least one item with the page's URL)",
            url,
            field,
        )
