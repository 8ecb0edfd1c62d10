"""``scrapy increcrawl demo``: the whole job on a machine with no internet and no key.

Starts the sample site and the stand-in Geonode API on 127.0.0.1, runs
``scrapy crawl incremental`` twice through the Geonode path with pages edited,
added and deleted in between (and the clock moved two days), and prints the
change set of each run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from increcrawl_scrapy import close_reasons

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    # Imported by the demo alone (Scrapy imports every command for every command).
    from increcrawl_scrapy.testing.geonode import GeonodeStandIn
    from increcrawl_scrapy.testing.site import SampleSite

DEMO_KEY = "demo-key-not-secret"
TWO_DAYS = 2 * 86400


def run(settings: BaseSettings, opts: argparse.Namespace) -> int:
    from increcrawl_scrapy.testing.geonode import GeonodeStandIn
    from increcrawl_scrapy.testing.site import SampleSite

    workdir = Path(opts.dir or tempfile.mkdtemp(prefix="increcrawl-demo-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "crawl_state.sqlite"
    if db.exists():  # another sample site's pages, on a clock two days ahead: not mixed
        print(
            f"{workdir} already holds a state database ({db.name}) from an earlier demo or "
            "crawl; the demo starts from nothing: give it another --dir (or none)."
        )
        return close_reasons.BAD_INPUT
    site, api = SampleSite(pages=opts.pages, template=True), GeonodeStandIn(api_keys=[DEMO_KEY])
    with site, api:
        print(f"Sample site:        {site.url} ({opts.pages} pages, sitemap {site.sitemap_url})")
        print(f"Stand-in Geonode:   {api.url}")
        print(f"State database:     {db}\n")

        first = _crawl(site, api, db, workdir / "run1.jsonl", shift=0)
        if first is None:
            return 1
        _show("Run 1", first)

        site.edit(2)
        site.edit(5, text="This page was rewritten between the runs.")
        [added] = site.add()
        site.delete(6, status=404)
        site.delete(7, status=410)
        print(
            "Between the runs: pages 2 and 5 edited, page "
            f"{added} added, page 6 deleted (404), page 7 deleted (410); clock moved 2 days.\n"
        )
        second = _crawl(site, api, db, workdir / "run2.jsonl", shift=TWO_DAYS)
        if second is None:
            return 1
        _show("Run 2", second)

        counters = api.counters()
        calls = counters["requests"]
        print(
            f"Geonode API calls: {sum(calls.values())} ("
            + ", ".join(f"{count} {call}" for call, count in sorted(calls.items()))
            + f"), tokens charged: {counters['tokens_charged']}"
        )
    print(f"\nState database: {db}")
    print(f"Feeds:          {workdir / 'run1.jsonl'}, {workdir / 'run2.jsonl'}")
    return 0


def _crawl(
    site: SampleSite, api: GeonodeStandIn, db: Path, feed: Path, shift: float
) -> list[dict] | None:
    from increcrawl_scrapy.testing.clock import SHIFT_VARIABLE

    env = crawl_env(DEMO_KEY, **{SHIFT_VARIABLE: str(shift)})
    command = crawl_command(
        site.sitemap_url,
        db,
        "INCRECRAWL_CLOCK=increcrawl_scrapy.testing.clock.shifted_time",
        "LOG_LEVEL=WARNING",
        api_url=api.url,
        feed=feed,
    )
    done = subprocess.run(command, env=env, cwd=db.parent, check=False)  # noqa: S603 - our argv
    if done.returncode != 0:
        print(f"scrapy crawl failed with exit code {done.returncode}")
        return None
    return (
        [json.loads(line) for line in feed.read_text().splitlines() if line.strip()]
        if (feed.suffix == ".jsonl")
        else json.loads(feed.read_text())
    )


def _show(title: str, items: list[dict]) -> None:
    groups: dict[str, list[str]] = defaultdict(list)
    for item in items:
        groups[item.get("change", "?")].append(item["url"])
    summary = ", ".join(f"{len(urls)} {change}" for change, urls in sorted(groups.items()))
    print(f"{title}: {len(items)} items in the change set ({summary or 'nothing changed'})")
    for change, urls in sorted(groups.items()):
        for url in sorted(urls, key=lambda u: (len(u), u))[:8]:
            print(f"  {change:<9} {url}")
        if len(urls) > 8:
            print(f"  {change:<9} ... and {len(urls) - 8} more")
    print()


def crawl_command(
    sitemap_url: str,
    db: str | Path,
    *settings: str,
    api_url: str | None = None,
    feed: str | Path | None = None,
) -> list[str]:
    """The argv of one crawl; *settings* are ``NAME=value`` pairs."""
    command = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "incremental",
        "-a",
        f"sitemap_url={sitemap_url}",
        "-s",
        f"INCRECRAWL_DB={db}",
    ]
    if api_url:
        command += ["-s", f"GEONODE_API_URL={api_url}"]
    if feed:
        command += ["-O", str(feed)]
    for setting in settings:
        command += ["-s", setting]
    return command


def crawl_env(api_key: str | None, **variables: str) -> dict[str, str]:
    """This environment, with the key (the only place it is ever put) and the project."""
    env = {k: v for k, v in os.environ.items() if k != "GEONODE_API_KEY"}
    if api_key:
        env["GEONODE_API_KEY"] = api_key
    env["SCRAPY_SETTINGS_MODULE"] = "increcrawl_scrapy.settings"
    env.update(variables)
    return env
