"""Every increcrawl setting, declared once: its field, name, default and how it is read
and validated (typed reads and ConfigError in ``reads.py``).

A crawl's components ask :func:`config_for` for the crawler's one
:class:`IncrecrawlConfig` and read typed attributes; nothing else calls
``settings.get*`` for these names. ``DEFAULTS`` is derived from the fields.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy import compat
from increcrawl_scrapy.config.reads import (
    ConfigError,
    Reader,
    check_format,
    check_regex,
    compile_user_pattern,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "gclid",
    "fbclid",
    "ref",
    "mc_cid",
    "mc_eid",
)

logger = logging.getLogger(__name__)

FETCHERS = ("auto", "geonode", "direct", "hybrid")
POLICIES = ("learned", "adaptive")
BUDGET_ORDERS = ("change", "oldest")
EXPORTS = ("changes", "all")
_DAY = 86_400.0

#: How a field's value is read: ``read(reader, setting name)``, raising ConfigError.
Read = Callable[[Reader, str], Any]


@dataclass(frozen=True)
class Setting:
    """One setting: its name, its default and how its field reads it."""

    name: str
    default: Any
    read: Read


def setting(name: str, default: Any, read: Read) -> Any:
    """A field read from the setting *name* (*default* when the setting is unset)."""
    return field(metadata={"setting": Setting(name, default, read)})


def unset_as(other: str) -> Any:
    """A field that says whether the setting of the field *other* is unset."""
    return field(metadata={"unset": other})


def number(kind: type, **bounds: float) -> Read:
    return lambda read, name: read.number(name, kind, **bounds)


def auto_or_count(read: Reader, name: str) -> int | None:
    """``auto`` (None: the package decides), else a count of at least 0."""
    value = read.raw(name)
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    try:
        return int(read.number(name, int, minimum=0))
    except ConfigError:
        raise ConfigError(
            name, value, "must be auto or a number of processes (0 or more)"
        ) from None


def choice(*allowed: str) -> Read:
    return lambda read, name: read.choice(name, allowed)


def strings(check: Callable[[str, str], None] | None = None, *, commas: bool = True) -> Read:
    return lambda read, name: read.strings(name, check=check, comma_separated=commas)


def patterns(read: Reader, name: str) -> tuple[str, ...]:
    """Regular expressions, one a string (a pattern's commas are its own)."""
    return read.strings(name, check=check_regex, comma_separated=False)


def unless_none(read_value: Read) -> Read:
    """None when the setting is None (unset), else *read_value*'s."""
    return lambda read, name: None if read.raw(name) is None else read_value(read, name)


def unless_blank(read_value: Read) -> Read:
    """None when the setting is empty or None, else *read_value*'s."""
    return lambda read, name: read_value(read, name) if read.raw(name) else None


def _api_url(read: Reader, name: str) -> str:
    # As the key: the setting, else the environment, so an exported GEONODE_API_URL
    # is never silently ignored.
    return (read.text_or_env(name) or read.defaults[name]).rstrip("/")


def _selector(read: Reader, name: str) -> str | None:
    return (read.raw(name) or "").strip() or None


@dataclass(frozen=True)
class IncrecrawlConfig:
    api_key: str | None = setting("GEONODE_API_KEY", None, lambda r, n: r.text_or_env(n) or None)
    api_url: str = setting("GEONODE_API_URL", "https://scraper.geonode.io", _api_url)
    concurrency: int = setting("GEONODE_CONCURRENCY", 2, number(int, minimum=1))
    concurrency_from_plan: bool = unset_as("concurrency")  # unset: read from the plan
    render_js: bool = setting("GEONODE_RENDER_JS", False, Reader.flag)
    # None: by spider, markdown for `incremental`, HTML for others (payload.formats_for)
    formats: tuple[str, ...] | None = setting(
        "GEONODE_FORMATS", None, unless_none(strings(check_format))
    )
    timeout_ms: int = setting("GEONODE_TIMEOUT_MS", 60_000, number(int, minimum=1000))
    max_retries: int = setting("GEONODE_MAX_RETRIES", 5, number(int, minimum=0))
    batch_min_urls: int = setting("GEONODE_BATCH_MIN_URLS", 50, number(int, minimum=1))
    batch_poll_interval: float = setting(
        "GEONODE_BATCH_POLL_INTERVAL", 10.0, number(float, above=0)
    )
    batch_timeout: float = setting("GEONODE_BATCH_TIMEOUT", 3_600.0, number(float, above=0))
    backoff_base: float = setting("GEONODE_BACKOFF_BASE", 0.5, number(float, minimum=0))
    backoff_max: float = setting("GEONODE_BACKOFF_MAX", 30.0, number(float, minimum=0))
    fetcher: str = setting("INCRECRAWL_FETCHER", "auto", choice(*FETCHERS))
    # hybrid: a host not probed is probed again after this long
    hybrid_retry: float = setting("INCRECRAWL_HYBRID_RETRY", 7 * _DAY, number(float, above=0))
    db_path: str = setting("INCRECRAWL_DB", "crawl_state.sqlite", Reader.text)
    db_lock_timeout: float = setting("INCRECRAWL_DB_LOCK_TIMEOUT", 10.0, number(float, minimum=0))
    # PostgreSQL: a worker's hold on the pages it fetches
    lease_seconds: float = setting("INCRECRAWL_LEASE_SECONDS", 600.0, number(float, minimum=1))
    min_interval: float = setting("INCRECRAWL_MIN_INTERVAL", 3_600.0, number(float, above=0))
    max_interval: float = setting("INCRECRAWL_MAX_INTERVAL", 30 * _DAY, number(float, above=0))
    default_interval: float = setting("INCRECRAWL_DEFAULT_INTERVAL", _DAY, number(float, above=0))
    change_factor: float = setting(
        "INCRECRAWL_CHANGE_FACTOR", 0.5, number(float, above=0, maximum=1)
    )
    nochange_factor: float = setting("INCRECRAWL_NOCHANGE_FACTOR", 1.5, number(float, minimum=1))
    missing_runs: int = setting("INCRECRAWL_MISSING_RUNS", 3, number(int, minimum=1))
    unreached_runs: int = setting("INCRECRAWL_UNREACHED_RUNS", 3, number(int, minimum=0))
    max_fetches: int = setting("INCRECRAWL_MAX_FETCHES", 0, number(int, minimum=0))
    budget_order: str = setting("INCRECRAWL_BUDGET_ORDER", "change", choice(*BUDGET_ORDERS))
    max_tokens: int = setting("INCRECRAWL_MAX_TOKENS", 0, number(int, minimum=0))
    monthly_tokens: int = setting("INCRECRAWL_MONTHLY_TOKENS", 0, number(int, minimum=0))
    tokens_reset_day: int = setting(
        "INCRECRAWL_TOKENS_RESET_DAY", 1, number(int, minimum=1, maximum=28)
    )
    max_error_ratio: float = setting(
        "INCRECRAWL_MAX_ERROR_RATIO", 0.5, number(float, minimum=0, maximum=1)
    )
    progress_interval: float = setting(
        "INCRECRAWL_PROGRESS_INTERVAL", 60.0, number(float, minimum=0)
    )
    tracking_params: tuple[str, ...] = setting(
        "INCRECRAWL_TRACKING_PARAMS", DEFAULT_TRACKING_PARAMS, strings()
    )
    strip_trailing_slash: bool = setting("INCRECRAWL_STRIP_TRAILING_SLASH", True, Reader.flag)
    volatile_patterns: tuple[str, ...] = setting(
        "INCRECRAWL_VOLATILE_PATTERNS", (), strings(commas=False)
    )
    revive_gone: bool = setting("INCRECRAWL_REVIVE_GONE", False, Reader.flag)  # deprecated
    export: str = setting("INCRECRAWL_EXPORT", "changes", choice(*EXPORTS))
    keep_content: bool = setting("INCRECRAWL_KEEP_CONTENT", False, Reader.flag)
    # runs of a seed whose checks the report shows
    history_runs: int = setting("INCRECRAWL_HISTORY_RUNS", 100, number(int, minimum=0))
    # the page's own content, not the site's template
    main_content: bool = setting("INCRECRAWL_MAIN_CONTENT", True, Reader.flag)
    # CSS or XPath of the site's main element
    content_selector: str | None = setting("INCRECRAWL_CONTENT_SELECTOR", None, _selector)
    # comment sections in the page's text (left out by default: readers', not the page's)
    keep_comments: bool = setting("INCRECRAWL_KEEP_COMMENTS", False, Reader.flag)
    max_page_bytes: int = setting(  # decompressed
        "INCRECRAWL_MAX_PAGE_BYTES", 10 * 1024 * 1024, number(int, minimum=1024)
    )
    # past this, a page without a main element is read whole, not extracted (its cost)
    content_max_bytes: int = setting(
        "INCRECRAWL_CONTENT_MAX_BYTES", 1024 * 1024, number(int, minimum=1024)
    )
    # worker processes taking pages' texts (0: the content thread; None: auto; RESULTS.md, #51)
    content_processes: int | None = setting("INCRECRAWL_CONTENT_PROCESSES", "auto", auto_or_count)
    skip_not_due: bool = setting("INCRECRAWL_SKIP_NOT_DUE", False, Reader.flag)
    flush_items: int = setting("INCRECRAWL_FLUSH_ITEMS", 100, number(int, minimum=1))
    flush_seconds: float = setting("INCRECRAWL_FLUSH_SECONDS", 5.0, number(float, above=0))
    # WordPress's feed of its last edited posts, read beside its core sitemap (undated)
    wordpress_feed: bool = setting("INCRECRAWL_WORDPRESS_FEED", True, Reader.flag)
    sitemap_max_bytes: int = setting(
        "INCRECRAWL_SITEMAP_MAX_BYTES", 50 * 1024 * 1024, number(int, minimum=1024)
    )
    sitemap_max_depth: int = setting("INCRECRAWL_SITEMAP_MAX_DEPTH", 5, number(int, minimum=0))
    include_subdomains: bool = setting("INCRECRAWL_INCLUDE_SUBDOMAINS", False, Reader.flag)
    allow: tuple[str, ...] = setting("INCRECRAWL_ALLOW", (), patterns)
    deny: tuple[str, ...] = setting("INCRECRAWL_DENY", (), patterns)
    sitemap_follow: tuple[str, ...] = setting("INCRECRAWL_SITEMAP_FOLLOW", (), patterns)
    sitemap_alternates: bool = setting("INCRECRAWL_SITEMAP_ALTERNATES", False, Reader.flag)
    url_field: str = setting("INCRECRAWL_URL_FIELD", "url", Reader.text)
    # None: the whole item (the incremental spider: markdown)
    content_field: str | None = setting("INCRECRAWL_CONTENT_FIELD", None, unless_blank(Reader.text))
    volatile_fields: tuple[str, ...] = setting("INCRECRAWL_VOLATILE_FIELDS", (), strings())
    item_key: tuple[str, ...] = setting("INCRECRAWL_ITEM_KEY", (), strings())
    # A field(), not a shared default: ruff cannot tell.
    clock: Callable[[], float] = setting("INCRECRAWL_CLOCK", None, Reader.clock)  # noqa: RUF009
    policy: str = setting("INCRECRAWL_POLICY", "learned", choice(*POLICIES))
    target_change_probability: float = setting(
        "INCRECRAWL_TARGET_CHANGE_PROBABILITY", 0.17, number(float, above=0, maximum=0.99)
    )
    stable_max_interval: float = setting(
        "INCRECRAWL_STABLE_MAX_INTERVAL", 180 * _DAY, number(float, above=0)
    )
    # None: no hard bound; the learned policy's bound from the host's rate holds
    max_staleness: float | None = setting("INCRECRAWL_MAX_STALENESS", None, Reader.duration)
    trusted_max_interval: float = setting(
        "INCRECRAWL_TRUSTED_MAX_INTERVAL", 730 * _DAY, number(float, above=0)
    )
    lastmod_min_evidence: int = setting(
        "INCRECRAWL_LASTMOD_MIN_EVIDENCE", 20, number(int, minimum=1)
    )
    lastmod_wave_share: float = setting(
        "INCRECRAWL_LASTMOD_WAVE_SHARE", 0.5, number(float, above=0, maximum=1)
    )
    lastmod_sample: float = setting(
        "INCRECRAWL_LASTMOD_SAMPLE", 0.0005, number(float, minimum=0, maximum=1)
    )

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
        """Every field read from *settings*; ConfigError names the first bad one."""
        if not isinstance(settings, BaseSettings):
            settings = BaseSettings(dict(settings))
        read = Reader(settings, DEFAULTS)
        values = {}
        for each in fields(cls):
            if "setting" in each.metadata:
                declared: Setting = each.metadata["setting"]
                values[each.name] = declared.read(read, declared.name)
            else:
                values[each.name] = read.unset(SETTINGS[each.metadata["unset"]].name)
        config = cls(**values)
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


#: Field name -> its setting, in the fields' order.
SETTINGS: dict[str, Setting] = {
    each.name: each.metadata["setting"]
    for each in fields(IncrecrawlConfig)
    if "setting" in each.metadata
}
#: Setting name -> default. ``settings.py``, the add-on and the docs read from here.
DEFAULTS: dict[str, Any] = {declared.name: declared.default for declared in SETTINGS.values()}


def config_for(source: Crawler | BaseSettings) -> IncrecrawlConfig:
    """The settings object, built here alone; a bad setting raises ConfigError.

    For a crawler, its one object, shared by every component of the crawl (at every
    ask until kept, so each component fails as before). Kept once the crawler's
    settings are frozen: Scrapy creates the spider before the add-ons run and the
    settings freeze, so a spider's ``from_crawler`` gets the settings as they stand
    then, not kept, and an add-on's later setting still counts. For settings with no
    crawler (the add-on checking them as they are built, a command), read now.
    """
    if isinstance(source, BaseSettings):  # no crawler yet: the add-on, a command
        settings, kept = source, {}
    else:
        settings, kept = source.settings, compat.kept_of_crawl(source)
    config: IncrecrawlConfig | None = kept.get("config")
    if config is None:
        config = IncrecrawlConfig.from_settings(settings)
        if settings.frozen:
            kept["config"] = config  # a crawler's for good; settings alone keep nothing
    return config


def redact(secret: str | None) -> str:
    """What may be shown of a key: at most its first four characters."""
    if not secret:
        return "<unset>"
    return f"{secret[:4]}***" if len(secret) > 8 else "***"


def skips_not_due(crawler: Crawler) -> bool:
    """A project's crawl skips the pages not due (``pages/skip_not_due.py``): the
    setting, or its spider's ``increcrawl_skip_not_due``."""
    default = config_for(crawler).skip_not_due
    return bool(getattr(crawler.spider, "increcrawl_skip_not_due", default))
