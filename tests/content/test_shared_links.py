"""The run's warning about links most of a host's pages share, on its own: said only
when most pages changed and those links moved, never on a first run or a few pages."""

from __future__ import annotations

from increcrawl_scrapy.crawl.shared_links import SharedLinks

NAV = ["- [About](/about/)", "- [Contact](/contact/)"]


def page(n: int, nav: list[str], edit: str = "") -> str:
    return "\n".join([f"# Post {n}", f"Own text {n}. {edit}", *nav, f"[Own link](/p/{n}/)"])


def run(memory: dict[str, str], pages: list[tuple[str, bool]]) -> list[str]:
    links = SharedLinks()
    for n, (text, changed) in enumerate(pages):
        links.saw(f"http://example.org/p/{n}/", text, changed=changed)
    return links.warnings(memory.get, memory.__setitem__)


def test_said_when_most_pages_changed_with_the_links_they_share() -> None:
    memory: dict[str, str] = {}
    assert run(memory, [(page(n, NAV), False) for n in range(6)]) == []  # first: learned
    moved = [*NAV, "- [Shop](/shop/)"]
    said = run(memory, [(page(n, moved), True) for n in range(6)])
    assert len(said) == 1 and "example.org: 6 of 6" in said[0] and "new [Shop](/shop/)" in said[0]
    assert "[Own link]" not in said[0]  # one page's own link is no shared link


def test_not_said_for_other_changes_few_changes_or_few_pages() -> None:
    memory: dict[str, str] = {}
    run(memory, [(page(n, NAV), False) for n in range(6)])
    # Every page edited, the links the same: a real site-wide edit.
    assert run(memory, [(page(n, NAV, edit="Edited."), True) for n in range(6)]) == []
    # The links moved, but only on the two pages reported changed out of six.
    moved = [*NAV, "- [Shop](/shop/)"]
    assert run(memory, [(page(n, moved), n < 2) for n in range(6)]) == []
    # Two pages read: too few to tell what most pages share (nothing remembered).
    fresh: dict[str, str] = {}
    run(fresh, [(page(n, NAV), False) for n in range(2)])
    assert fresh == {}
