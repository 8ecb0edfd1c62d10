from __future__ import annotations

import pytest
from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import DEFAULTS, ConfigError, IncrecrawlConfig


def test_defaults_match_design() -> None:
    config = IncrecrawlConfig.from_settings({})
    assert config.api_url == "https://scraper.geonode.io"
    assert config.concurrency == 2
    assert config.render_js is False
    assert config.timeout_ms == 60_000
    assert config.batch_poll_interval == 10
    assert config.fetcher == "auto"
    assert config.db_path == "crawl_state.sqlite"
    assert config.min_interval == 3600
    assert config.max_interval == 30 * 86400
    assert config.default_interval == 86400
    assert config.change_factor == 0.5
    assert config.nochange_factor == 1.5
    assert config.missing_runs == 3
    assert config.export == "changes"
    assert config.revive_gone is False
    assert config.strip_trailing_slash is True
    assert "utm_*" in config.tracking_params


def test_every_default_is_read() -> None:
    # A setting in DEFAULTS that from_settings never reads would drift silently.
    read: set[str] = set()

    class Recording(BaseSettings):
        def get(self, name, default=None):  # type: ignore[override]
            read.add(name)
            return super().get(name, default)

    IncrecrawlConfig.from_settings(Recording())
    assert read == set(DEFAULTS)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("INCRECRAWL_MIN_INTERVAL", -5),
        ("INCRECRAWL_MAX_INTERVAL", 0),
        ("INCRECRAWL_DEFAULT_INTERVAL", "soon"),
        ("INCRECRAWL_CHANGE_FACTOR", 0),
        ("INCRECRAWL_CHANGE_FACTOR", 1.2),
        ("INCRECRAWL_NOCHANGE_FACTOR", 0.9),
        ("INCRECRAWL_FETCHER", "curl"),
        ("INCRECRAWL_EXPORT", "some"),
        ("INCRECRAWL_MISSING_RUNS", 0),
        ("INCRECRAWL_FLUSH_ITEMS", 2.5),
        ("GEONODE_CONCURRENCY", 0),
        ("GEONODE_TIMEOUT_MS", 10),
        ("GEONODE_RENDER_JS", "perhaps"),
        ("INCRECRAWL_VOLATILE_PATTERNS", ["(unclosed"]),
        ("INCRECRAWL_TRACKING_PARAMS", 5),
        ("INCRECRAWL_MIN_INTERVAL", float("nan")),
    ],
)
def test_bad_values_name_the_setting_and_value(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        IncrecrawlConfig.from_settings({name: value})
    assert info.value.setting == name
    shown = value[0] if isinstance(value, list) else value  # a list names its bad entry
    assert str(info.value).startswith(f"{name}={shown!r}")


def test_min_above_max_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"INCRECRAWL_MIN_INTERVAL=7200.*MAX_INTERVAL"):
        IncrecrawlConfig.from_settings(
            {
                "INCRECRAWL_MIN_INTERVAL": 7200,
                "INCRECRAWL_MAX_INTERVAL": 3600,
                "INCRECRAWL_DEFAULT_INTERVAL": 3600,
            }
        )


def test_command_line_strings_are_parsed() -> None:
    config = IncrecrawlConfig.from_settings(
        {
            "INCRECRAWL_MIN_INTERVAL": "60",
            "GEONODE_RENDER_JS": "true",
            "INCRECRAWL_TRACKING_PARAMS": "utm_*,sid",
            "INCRECRAWL_VOLATILE_PATTERNS": '["Views: \\\\d+", "a{1,2}"]',
            "INCRECRAWL_FETCHER": "DIRECT",
        }
    )
    assert config.min_interval == 60.0
    assert config.render_js is True
    assert config.tracking_params == ("utm_*", "sid")
    assert config.volatile_patterns == (r"Views: \d+", "a{1,2}")
    assert config.fetcher == "direct"


def test_single_pattern_string_keeps_its_commas() -> None:
    config = IncrecrawlConfig.from_settings({"INCRECRAWL_VOLATILE_PATTERNS": r"x{1,3}"})
    assert config.volatile_patterns == ("x{1,3}",)


def test_key_from_environment_and_fetcher_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEONODE_API_KEY", raising=False)
    assert IncrecrawlConfig.from_settings({}).uses_geonode is False
    monkeypatch.setenv("GEONODE_API_KEY", "env-secret-key-123")
    config = IncrecrawlConfig.from_settings({})
    assert config.api_key == "env-secret-key-123"
    assert config.uses_geonode is True
    assert IncrecrawlConfig.from_settings({"INCRECRAWL_FETCHER": "direct"}).uses_geonode is False


def test_geonode_fetcher_without_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEONODE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"INCRECRAWL_FETCHER='geonode'.*GEONODE_API_KEY"):
        IncrecrawlConfig.from_settings({"INCRECRAWL_FETCHER": "geonode"})


def test_hybrid_fetcher_needs_a_key_and_uses_geonode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEONODE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"INCRECRAWL_FETCHER='hybrid'.*GEONODE_API_KEY"):
        IncrecrawlConfig.from_settings({"INCRECRAWL_FETCHER": "hybrid"})
    config = IncrecrawlConfig.from_settings(
        {"INCRECRAWL_FETCHER": "hybrid", "GEONODE_API_KEY": "k" * 12}
    )
    assert config.hybrid and config.uses_geonode and config.hybrid_retry == 7 * 86400
    with pytest.raises(ConfigError, match="INCRECRAWL_HYBRID_RETRY"):
        IncrecrawlConfig.from_settings({"INCRECRAWL_HYBRID_RETRY": 0})


def test_repr_never_shows_the_key() -> None:
    config = IncrecrawlConfig.from_settings({"GEONODE_API_KEY": "sk-very-secret-value"})
    assert "sk-very-secret-value" not in repr(config)
    assert "sk-v***" in repr(config)


def test_a_crawler_has_one_settings_object_once_its_settings_are_frozen() -> None:
    from scrapy.utils.test import get_crawler

    from increcrawl_scrapy.config import config_for

    crawler = get_crawler(settings_dict={"INCRECRAWL_MAX_FETCHES": 7})  # settings frozen
    assert config_for(crawler) is config_for(crawler)
    assert config_for(crawler).max_fetches == 7
    assert config_for(get_crawler()) is not config_for(crawler)


def test_settings_not_yet_frozen_are_read_at_each_ask() -> None:
    # Scrapy creates the spider before the add-ons run: what they set later counts.
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider

    from increcrawl_scrapy.config import config_for

    crawler = Crawler(Spider, {"INCRECRAWL_MAX_FETCHES": 7})
    assert config_for(crawler).max_fetches == 7
    crawler.settings.set("INCRECRAWL_MAX_FETCHES", 8)
    assert config_for(crawler).max_fetches == 8


def test_a_bad_setting_raises_at_every_ask() -> None:
    from scrapy.utils.test import get_crawler

    from increcrawl_scrapy.config import config_for

    crawler = get_crawler(settings_dict={"INCRECRAWL_MISSING_RUNS": 0})
    for _ in range(2):
        with pytest.raises(ConfigError, match="INCRECRAWL_MISSING_RUNS"):
            config_for(crawler)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, None), (604_800, 604_800.0), ("3600", 3_600.0), ("7d", 604_800.0), ("12h", 43_200.0)],
)
def test_max_staleness_takes_seconds_or_a_duration(value: object, seconds: float | None) -> None:
    config = IncrecrawlConfig.from_settings({"INCRECRAWL_MAX_STALENESS": value})
    assert config.max_staleness == seconds


@pytest.mark.parametrize("value", ["soon", "7x", "-1d", 0, True])
def test_a_max_staleness_that_is_no_duration_is_refused(value: object) -> None:
    with pytest.raises(ConfigError, match="INCRECRAWL_MAX_STALENESS"):
        IncrecrawlConfig.from_settings({"INCRECRAWL_MAX_STALENESS": value})
