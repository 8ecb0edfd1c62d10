"""``scrapy increcrawl check``: is the key good, and how much concurrency does the plan allow?"""

from __future__ import annotations

import argparse

from scrapy.settings import BaseSettings

from increcrawl_scrapy.commands.opening import config_of
from increcrawl_scrapy.config import redact


def run(settings: BaseSettings, opts: argparse.Namespace) -> int:
    config = config_of(settings)
    if config is None:  # told
        return 2
    if not config.api_key:
        print("No GEONODE_API_KEY (setting or environment variable): crawls fetch pages directly.")
        return 1
    url = f"{config.api_url}/v1/usage/concurrency"
    import requests  # this command only (outside any reactor): not every command's import

    try:
        answer = requests.get(url, headers={"X-Api-Key": config.api_key}, timeout=30)
    except requests.RequestException as exc:
        print(f"Could not reach {config.api_url}: {type(exc).__name__}")
        return 1
    if answer.status_code == 401:
        print(f"The API rejected the key {redact(config.api_key)} (401).")
        return 1
    if answer.status_code != 200:
        print(f"The API answered {answer.status_code} to GET /v1/usage/concurrency.")
        return 1
    try:
        usage = answer.json()
        limit = int(usage["work_concurrency_limit"])
        in_use = int(usage["work_concurrency_in_use"])
    except (ValueError, KeyError, TypeError):
        print("The API's answer to GET /v1/usage/concurrency is not the documented JSON.")
        return 1
    print(f"Key {redact(config.api_key)} accepted by {config.api_url}.")
    print(f"Work concurrency: {in_use} in use of {limit} allowed by the plan.")
    print(f"Suggested setting: GEONODE_CONCURRENCY = {max(1, limit)} (now {config.concurrency}).")
    return 0
