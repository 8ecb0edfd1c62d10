"""Listing pages in the add-on (issue #50, item 12): requests a day on a Hugo blog.

    python benchmarks/listing_pages.py [--days 15] [--posts 30]

A Hugo blog (``tests/support/blog.py``: paginated home, section and tag pages) behind
nginx, crawled once a day by a ``CrawlSpider`` with rules through the add-on
(``tests/embedding/blog_runs.py``), the clock moved a day a run; on day 3 a post is
edited and one added, on day 6 one deleted. Prints each day's requests (nginx's
access log), of them the listings' (pages that are no post) and the direct checks,
and the changes delivered. Run it against another checkout of the package
(``PYTHONPATH``) to compare: the change sets must be equal. Needs hugo and nginx.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from twisted.internet import asyncioreactor

asyncioreactor.install()

from twisted.internet import defer, reactor  # noqa: E402

import increcrawl_scrapy  # noqa: E402
from tests.embedding.blog_runs import daily_runs  # noqa: E402
from tests.support.blog import HugoBlog  # noqa: E402

POST = re.compile(r"^/posts/post-\d+/$")


def _edits() -> dict[int, object]:
    def edit_and_add(blog: HugoBlog) -> None:
        blog.edit("post-005")
        blog.add()

    def delete(blog: HugoBlog) -> None:
        blog.delete("post-010")

    return {3: edit_and_add, 6: delete}


async def measure(days: int, posts: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _, runs = await daily_runs(Path(tmp), days, _edits(), posts=posts)  # type: ignore[arg-type]
    print(f"package: {increcrawl_scrapy.__file__}")
    print("| day | requests | listings | checked | changes |")
    print("|---|---|---|---|---|")
    for run in runs:
        listings = sum(1 for path in run.fetched if not POST.match(path))
        changes = ", ".join(f"{change} {url.rsplit('/', 2)[-2]}" for change, url in run.changes())
        if run.day == 0:
            changes = f"{len(run.items)} new"
        print(
            f"| {run.day:.0f} | {len(run.fetched)} | {listings} | {len(run.checked)} | {changes} |"
        )
    total = sum(len(run.fetched) for run in runs)
    print(f"| all | {total} | {sum(1 for r in runs for p in r.fetched if not POST.match(p))} | "
          f"{sum(len(r.checked) for r in runs)} | |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=15)
    parser.add_argument("--posts", type=int, default=30)
    args = parser.parse_args()
    done = defer.ensureDeferred(measure(args.days, args.posts))
    done.addErrback(lambda failure: failure.printTraceback())
    done.addBoth(lambda _: reactor.stop())  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
