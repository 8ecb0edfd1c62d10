"""What the add-on's run summary weighs a run's fetches against: a project's own
spider's pages with state, those live and those gone that the run fetched, never its
items' rows (a new user's walk and the fifth wave's review of the summary, #50)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy.exceptions import DropItem

from tests.embedding.small_site import SmallSite, small_site
from tests.embedding.test_listing_answers import HOME, ShopSpider
from tests.support.nginx import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]

EVERY_PAGE = "fetched 4 of 4 pages with state (as many as fetching them all)"


async def three_products(site: SmallSite, **settings: Any) -> None:
    """A home page and three products, crawled on day 0; then product 2 removed."""
    site.set("/", HOME + ' <a class="p" href="/p/3/">3</a>')
    for n in (1, 2, 3):
        site.set(f"/p/{n}/", f"<b>{n}</b>")
    await site.run(ShopSpider, 0, **settings)
    (site.root / "p" / "2" / "index.html").unlink()
    (site.root / "p" / "2").rmdir()  # a 404 (nginx forbids a directory's listing)


@pytest_twisted.ensureDeferred
async def test_a_page_found_gone_is_one_of_the_pages_with_state(tmp_path: Path) -> None:
    """Counted fetched but not with state: "fetched 4 pages, more than the 3"."""
    with small_site(tmp_path) as site:
        await three_products(site)
        run = await site.run(ShopSpider, 60)  # every page due again
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/", "/p/3/"]
        assert run.changes() == [("gone", f"{site.url}/p/2/")]
        assert EVERY_PAGE in run.log


@pytest_twisted.ensureDeferred
async def test_a_page_still_gone_and_checked_again_is_one_of_them(tmp_path: Path) -> None:
    """A gone page checked again (404 again, "unchanged"): "more than the 3" too;
    and with a live page no response led to, "fetched 3 of 3", all reached."""
    with small_site(tmp_path) as site:
        await three_products(site)
        await site.run(ShopSpider, 60)  # /p/2/ found gone
        run = await site.run(ShopSpider, 400)  # every page due, the gone one too
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/", "/p/3/"]
        assert EVERY_PAGE in run.log
        site.set("/", HOME)  # /p/3/ lives on, no longer linked
        run = await site.run(ShopSpider, 800)
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/"]
        assert "reached 3 of the 4 pages with state (3 fetched, 0 skipped)" in run.log


class DropGone:
    """A project's later pipeline that keeps no deletions (an append-only store)."""

    def process_item(self, item: Any) -> Any:
        if item.get("change") == "gone":
            raise DropItem("deletions not kept")
        return item


@pytest_twisted.ensureDeferred
async def test_a_gone_page_whose_item_a_later_pipeline_drops_is_counted_once(
    tmp_path: Path,
) -> None:
    """Its gone result not written (its item not delivered), the page stays live:
    counted live and gone, the run said "reached 4 of the 5 pages"."""
    with small_site(tmp_path) as site:
        await three_products(site)
        run = await site.run(ShopSpider, 60, ITEM_PIPELINES={f"{__name__}.DropGone": 900})
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/", "/p/3/"]
        assert EVERY_PAGE in run.log


@pytest_twisted.ensureDeferred
async def test_items_rows_of_a_declared_key_are_no_pages(tmp_path: Path) -> None:
    """With INCRECRAWL_ITEM_KEY each item has a row: "reached 4 of the 7 pages"."""
    with small_site(tmp_path) as site:
        await three_products(site, INCRECRAWL_ITEM_KEY="url")
        site.set("/p/2/", "<b>2</b>")  # back
        run = await site.run(ShopSpider, 60, INCRECRAWL_ITEM_KEY="url")  # all due
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/", "/p/3/"]
        assert EVERY_PAGE in run.log
