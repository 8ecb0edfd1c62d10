"""Every increcrawl setting: its name, default and validation, in one place (typed
reads and ConfigError in ``setting_reads.py``).

Components call :meth:`IncrecrawlConfig.from_settings` once and read typed
attributes afterwards; nothing else calls ``settings.get*`` for these names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config.reads import (
    ConfigError,
    Reader,
    check_format,
    check_regex,
    compile_user_pattern,
)

DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "gclid",
    "fbclid",
    "ref",
    "mc_cid",
    "mc_eid",
)

#: Setting name -> default. ``settings.py`` and the add-on read from here.
DEFAULTS: dict[str, Any] = {
    "GEONODE_API_KEY": None,
    "GEONODE_API_URL": "https://scraper.geonode.io",
    "GEONODE_CONCURRENCY": 2,
    "GEONODE_RENDER_JS": False,
    "GEONODE_FORMATS": None,  # by spider: markdown for `incremental`, HTML for others
    "GEONODE_TIMEOUT_MS": 60_000,
    "GEONODE_MAX_RETRIES": 5,
    "GEONODE_BATCH_MIN_URLS": 50,
    "GEONODE_BATCH_POLL_INTERVAL": 10.0,
    "GEONODE_BATCH_TIMEOUT": 3_600.0,
    "GEONODE_BACKOFF_BASE": 0.5,
    "GEONODE_BACKOFF_MAX": 30.0,
    "INCRECRAWL_FETCHER": "auto",
    "INCRECRAWL_HYBRID_RETRY": 7 * 86_400.0,  # hybrid: a host not probed is probed again
    "INCRECRAWL_DB": "crawl_state.sqlite",
    "INCRECRAWL_DB_LOCK_TIMEOUT": 10.0,
    "INCRECRAWL_LEASE_SECONDS": 600.0,  # PostgreSQL: a worker's hold on the pages it fetches
    "INCRECRAWL_MIN_INTERVAL": 3_600.0,
    "INCRECRAWL_MAX_INTERVAL": 30 * 86_400.0,
    "INCRECRAWL_DEFAULT_INTERVAL": 86_400.0,
    "INCRECRAWL_CHANGE_FACTOR": 0.5,
    "INCRECRAWL_NOCHANGE_FACTOR": 1.5,
    "INCRECRAWL_MISSING_RUNS": 3,
    "INCRECRAWL_MAX_FETCHES": 0,
    "INCRECRAWL_BUDGET_ORDER": "change",
    "INCRECRAWL_MAX_TOKENS": 0,
    "INCRECRAWL_MONTHLY_TOKENS": 0,
    "INCRECRAWL_TOKENS_RESET_DAY": 1,
    "INCRECRAWL_MAX_ERROR_RATIO": 0.5,
    "INCRECRAWL_PROGRESS_INTERVAL": 60.0,
    "INCRECRAWL_TRACKING_PARAMS": DEFAULT_TRACKING_PARAMS,
    "INCRECRAWL_STRIP_TRAILING_SLASH": True,
    "INCRECRAWL_VOLATILE_PATTERNS": (),
    "INCRECRAWL_REVIVE_GONE": False,
    "INCRECRAWL_EXPORT": "changes",
    "INCRECRAWL_KEEP_CONTENT": False,
    "INCRECRAWL_HISTORY_RUNS": 100,  # runs of a seed whose checks the report shows
    "INCRECRAWL_MAIN_CONTENT": True,  # the page's own content, not the site's template
    "INCRECRAWL_CONTENT_SELECTOR": None,  # CSS or XPath of the site's main element
    "INCRECRAWL_MAX_PAGE_BYTES": 10 * 1024 * 1024,  # decompressed
    "INCRECRAWL_SKIP_NOT_DUE": False,
    "INCRECRAWL_FLUSH_ITEMS": 100,
    "INCRECRAWL_FLUSH_SECONDS": 5.0,
    "INCRECRAWL_SITEMAP_MAX_BYTES": 50 * 1024 * 1024,
    "INCRECRAWL_SITEMAP_MAX_DEPTH": 5,
    "INCRECRAWL_INCLUDE_SUBDOMAINS": False,
    "INCRECRAWL_ALLOW": (),
    "INCRECRAWL_DENY": (),
    "INCRECRAWL_SITEMAP_FOLLOW": (),
    "INCRECRAWL_SITEMAP_ALTERNATES": False,
    "INCRECRAWL_URL_FIELD": "url",
    "INCRECRAWL_CONTENT_FIELD": None,  # the whole item (the incremental spider: markdown)
    "INCRECRAWL_VOLATILE_FIELDS": (),
    "INCRECRAWL_ITEM_KEY": (),
    "INCRECRAWL_CLOCK": None,
    "INCRECRAWL_POLICY": "learned",
    "INCRECRAWL_TARGET_CHANGE_PROBABILITY": 0.1,
    "INCRECRAWL_STABLE_MAX_INTERVAL": 180 * 86_400.0,
    "INCRECRAWL_TRUSTED_MAX_INTERVAL": 730 * 86_400.0,
    "INCRECRAWL_LASTMOD_MIN_EVIDENCE": 20,
    "INCRECRAWL_LASTMOD_WAVE_SHARE": 0.5,
    "INCRECRAWL_LASTMOD_SAMPLE": 0.0005,
}

logger = logging.getLogger(__name__)

FETCHERS = ("auto", "geonode", "direct", "hybrid")
POLICIES = ("learned", "adaptive")
BUDGET_ORDERS = ("change", "oldest")
EXPORTS = ("changes", "all")


@dataclass(frozen=True)
class IncrecrawlConfig:
    api_key: str | None
    api_url: str
    concurrency: int
    concurrency_from_plan: bool  # GEONODE_CONCURRENCY unset: read from the plan
    render_js: bool
    formats: tuple[str, ...] | None  # None: by spider (payload.formats_for)
    timeout_ms: int
    max_retries: int
    batch_min_urls: int
    batch_poll_interval: float
    batch_timeout: float
    backoff_base: float
    backoff_max: float
    fetcher: str
    hybrid_retry: float
    db_path: str
    db_lock_timeout: float
    lease_seconds: float
    min_interval: float
    max_interval: float
    default_interval: float
    change_factor: float
    nochange_factor: float
    missing_runs: int
    max_fetches: int
    budget_order: str
    max_tokens: int
    monthly_tokens: int
    tokens_reset_day: int
    max_error_ratio: float
    progress_interval: float
    tracking_params: tuple[str, ...]
    strip_trailing_slash: bool
    volatile_patterns: tuple[str, ...]
    revive_gone: bool
    export: str
    keep_content: bool
    history_runs: int
    main_content: bool
    content_selector: str | None
    max_page_bytes: int
    skip_not_due: bool
    flush_items: int
    flush_seconds: float
    sitemap_max_bytes: int
    sitemap_max_depth: int
    include_subdomains: bool
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    sitemap_follow: tuple[str, ...]
    sitemap_alternates: bool
    url_field: str
    content_field: str | None
    volatile_fields: tuple[str, ...]
    item_key: tuple[str, ...]
    clock: Callable[[], float]
    policy: str
    target_change_probability: float
    stable_max_interval: float
    trusted_max_interval: float
    lastmod_min_evidence: int
    lastmod_wave_share: float
    lastmod_sample: float

    def __repr__(self) -> str:
        # The key must never reach a log line, even through a debug repr.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["api_key"] = redact(self.api_key)
        body = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"IncrecrawlConfig({body})"

    @property
    def uses_geonode(self) -> bool:
        """The fetcher actually in use once ``auto`` is resolved."""
        if self.fetcher == "auto":
            return bool(self.api_key)
        return self.fetcher in ("geonode", "hybrid")  # hybrid: extractions after probes

    @property
    def hybrid(self) -> bool:
        """Pages probed directly first, extracted through Geonode when they changed."""
        return self.fetcher == "hybrid"

    @classmethod
    def from_settings(cls, settings: BaseSettings | Mapping[str, Any]) -> IncrecrawlConfig:
        if not isinstance(settings, BaseSettings):
            settings = BaseSettings(dict(settings))
        read = Reader(settings, DEFAULTS)
        # The key and the API URL are read the same way: the setting, else the
        # environment, so an exported GEONODE_API_URL is never silently ignored.
        api_url = read.text_or_env("GEONODE_API_URL") or DEFAULTS["GEONODE_API_URL"]
        config = cls(
            api_key=read.text_or_env("GEONODE_API_KEY") or None,
            api_url=api_url.rstrip("/"),
            concurrency=read.number("GEONODE_CONCURRENCY", int, minimum=1),
            concurrency_from_plan=settings.get("GEONODE_CONCURRENCY") is None,
            render_js=read.flag("GEONODE_RENDER_JS"),
            formats=read.strings("GEONODE_FORMATS", check=check_format)
            if read.raw("GEONODE_FORMATS") is not None
            else None,
            timeout_ms=read.number("GEONODE_TIMEOUT_MS", int, minimum=1000),
            max_retries=read.number("GEONODE_MAX_RETRIES", int, minimum=0),
            batch_min_urls=read.number("GEONODE_BATCH_MIN_URLS", int, minimum=1),
            batch_poll_interval=read.number("GEONODE_BATCH_POLL_INTERVAL", float, above=0),
            batch_timeout=read.number("GEONODE_BATCH_TIMEOUT", float, above=0),
            backoff_base=read.number("GEONODE_BACKOFF_BASE", float, minimum=0),
            backoff_max=read.number("GEONODE_BACKOFF_MAX", float, minimum=0),
            fetcher=read.choice("INCRECRAWL_FETCHER", FETCHERS),
            hybrid_retry=read.number("INCRECRAWL_HYBRID_RETRY", float, above=0),
            db_path=read.text("INCRECRAWL_DB"),
            db_lock_timeout=read.number("INCRECRAWL_DB_LOCK_TIMEOUT", float, minimum=0),
            lease_seconds=read.number("INCRECRAWL_LEASE_SECONDS", float, minimum=1),
            min_interval=read.number("INCRECRAWL_MIN_INTERVAL", float, above=0),
            max_interval=read.number("INCRECRAWL_MAX_INTERVAL", float, above=0),
            default_interval=read.number("INCRECRAWL_DEFAULT_INTERVAL", float, above=0),
            change_factor=read.number("INCRECRAWL_CHANGE_FACTOR", float, above=0, maximum=1),
            nochange_factor=read.number("INCRECRAWL_NOCHANGE_FACTOR", float, minimum=1),
            missing_runs=read.number("INCRECRAWL_MISSING_RUNS", int, minimum=1),
            max_fetches=read.number("INCRECRAWL_MAX_FETCHES", int, minimum=0),
            budget_order=read.choice("INCRECRAWL_BUDGET_ORDER", BUDGET_ORDERS),
            max_tokens=read.number("INCRECRAWL_MAX_TOKENS", int, minimum=0),
            monthly_tokens=read.number("INCRECRAWL_MONTHLY_TOKENS", int, minimum=0),
            tokens_reset_day=read.number("INCRECRAWL_TOKENS_RESET_DAY", int, minimum=1, maximum=28),
            max_error_ratio=read.number("INCRECRAWL_MAX_ERROR_RATIO", float, minimum=0, maximum=1),
            progress_interval=read.number("INCRECRAWL_PROGRESS_INTERVAL", float, minimum=0),
            tracking_params=read.strings("INCRECRAWL_TRACKING_PARAMS"),
            strip_trailing_slash=read.flag("INCRECRAWL_STRIP_TRAILING_SLASH"),
            volatile_patterns=read.strings("INCRECRAWL_VOLATILE_PATTERNS", comma_separated=False),
            revive_gone=read.flag("INCRECRAWL_REVIVE_GONE"),
            export=read.choice("INCRECRAWL_EXPORT", EXPORTS),
            keep_content=read.flag("INCRECRAWL_KEEP_CONTENT"),
            history_runs=read.number("INCRECRAWL_HISTORY_RUNS", int, minimum=0),
            main_content=read.flag("INCRECRAWL_MAIN_CONTENT"),
            content_selector=(read.raw("INCRECRAWL_CONTENT_SELECTOR") or "").strip() or None,
            max_page_bytes=read.number("INCRECRAWL_MAX_PAGE_BYTES", int, minimum=1024),
            skip_not_due=read.flag("INCRECRAWL_SKIP_NOT_DUE"),
            flush_items=read.number("INCRECRAWL_FLUSH_ITEMS", int, minimum=1),
            flush_seconds=read.number("INCRECRAWL_FLUSH_SECONDS", float, above=0),
            sitemap_max_bytes=read.number("INCRECRAWL_SITEMAP_MAX_BYTES", int, minimum=1024),
            sitemap_max_depth=read.number("INCRECRAWL_SITEMAP_MAX_DEPTH", int, minimum=0),
            include_subdomains=read.flag("INCRECRAWL_INCLUDE_SUBDOMAINS"),
            allow=read.strings("INCRECRAWL_ALLOW", check=check_regex, comma_separated=False),
            deny=read.strings("INCRECRAWL_DENY", check=check_regex, comma_separated=False),
            sitemap_follow=read.strings(
                "INCRECRAWL_SITEMAP_FOLLOW", check=check_regex, comma_separated=False
            ),
            sitemap_alternates=read.flag("INCRECRAWL_SITEMAP_ALTERNATES"),
            url_field=read.text("INCRECRAWL_URL_FIELD"),
            content_field=read.text("INCRECRAWL_CONTENT_FIELD")
            if read.raw("INCRECRAWL_CONTENT_FIELD")
            else None,
            volatile_fields=read.strings("INCRECRAWL_VOLATILE_FIELDS"),
            item_key=read.strings("INCRECRAWL_ITEM_KEY"),
            clock=read.clock("INCRECRAWL_CLOCK"),
            policy=read.choice("INCRECRAWL_POLICY", POLICIES),
            target_change_probability=read.number(
                "INCRECRAWL_TARGET_CHANGE_PROBABILITY", float, above=0, maximum=0.99
            ),
            stable_max_interval=read.number("INCRECRAWL_STABLE_MAX_INTERVAL", float, above=0),
            trusted_max_interval=read.number("INCRECRAWL_TRUSTED_MAX_INTERVAL", float, above=0),
            lastmod_min_evidence=read.number("INCRECRAWL_LASTMOD_MIN_EVIDENCE", int, minimum=1),
            lastmod_wave_share=read.number(
                "INCRECRAWL_LASTMOD_WAVE_SHARE", float, above=0, maximum=1
            ),
            lastmod_sample=read.number("INCRECRAWL_LASTMOD_SAMPLE", float, minimum=0, maximum=1),
        )
        config._check_consistency()
        for pattern in config.volatile_patterns:
            compile_user_pattern(pattern)
        return config

    def _check_consistency(self) -> None:
        if self.min_interval > self.max_interval:
            raise ConfigError(
                "INCRECRAWL_MIN_INTERVAL",
                self.min_interval,
                f"greater than INCRECRAWL_MAX_INTERVAL ({self.max_interval!r})",
            )
        if self.stable_max_interval < self.max_interval:
            raise ConfigError(
                "INCRECRAWL_STABLE_MAX_INTERVAL",
                self.stable_max_interval,
                f"less than INCRECRAWL_MAX_INTERVAL ({self.max_interval!r})",
            )
        if self.trusted_max_interval < self.max_interval:
            raise ConfigError(
                "INCRECRAWL_TRUSTED_MAX_INTERVAL",
                self.trusted_max_interval,
                f"less than INCRECRAWL_MAX_INTERVAL ({self.max_interval!r})",
            )
        if not self.min_interval <= self.default_interval <= self.max_interval:
            raise ConfigError(
                "INCRECRAWL_DEFAULT_INTERVAL",
                self.default_interval,
                "must lie between INCRECRAWL_MIN_INTERVAL and INCRECRAWL_MAX_INTERVAL",
            )
        if self.fetcher in ("geonode", "hybrid") and not self.api_key:
            raise ConfigError(
                "INCRECRAWL_FETCHER",
                self.fetcher,
                "needs GEONODE_API_KEY (setting or environment variable)",
            )
        if not self.db_path.strip():
            raise ConfigError("INCRECRAWL_DB", self.db_path, "must name a file")


def redact(secret: str | None) -> str:
    """What may be shown of a key: at most its first four characters."""
    if not secret:
        return "<unset>"
    return f"{secret[:4]}***" if len(secret) > 8 else "***"
