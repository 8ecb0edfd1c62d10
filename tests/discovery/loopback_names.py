"""A DNS resolver for tests: every ``*.localhost`` name is the loopback address
(RFC 6761 reserves them for it), so a site on ``www.localhost`` can be served by a
real server on 127.0.0.1 without touching the machine's /etc/hosts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer


@implementer(IResolverSimple)
class LoopbackNames:
    """Answers ``*.localhost`` itself, asks the resolver it replaced for the rest."""

    def __init__(self, others: Any) -> None:
        self.others = others

    def getHostByName(self, name: str, timeout: Any = ()) -> Any:
        if name == "localhost" or name.endswith(".localhost"):
            return defer.succeed("127.0.0.1")
        return self.others.getHostByName(name, timeout)


@contextmanager
def loopback_names() -> Iterator[None]:
    """The reactor resolves ``*.localhost`` while the block runs (a crawl started by
    ``Crawler.crawl`` leaves the reactor's resolver as it is: CrawlerProcess installs
    ``DNS_RESOLVER``, not the crawler)."""
    from twisted.internet import reactor

    before = reactor.resolver  # type: ignore[attr-defined]
    reactor.installResolver(LoopbackNames(before))  # type: ignore[attr-defined]
    try:
        yield
    finally:
        reactor.installResolver(before)  # type: ignore[attr-defined]
