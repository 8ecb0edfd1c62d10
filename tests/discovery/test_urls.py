from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.provisional import urls

from increcrawl_scrapy.urls import normalize_url, same_page


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "https://Example.com:443/docs/?utm_source=x&b=2&a=1#top",
            "https://example.com/docs?a=1&b=2",
        ),
        ("HTTPS://EXAMPLE.COM", "https://example.com/"),
        ("https://example.com/", "https://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("http://example.com:8080/a/", "http://example.com:8080/a"),
        (
            "https://example.com/a?gclid=1&fbclid=2&ref=x&mc_cid=3&mc_eid=4&q=1",
            "https://example.com/a?q=1",
        ),
        ("https://example.com/a?UTM_Medium=x&q=1", "https://example.com/a?q=1"),
        ("https://example.com/a?b=1&a=&b=0", "https://example.com/a?a=&b=0&b=1"),
        ("https://example.com/a?flag", "https://example.com/a?flag="),
        ("https://bücher.de/straße", "https://xn--bcher-kva.de/stra%C3%9Fe"),
        ("https://xn--bcher-kva.de/stra%C3%9Fe", "https://xn--bcher-kva.de/stra%C3%9Fe"),
        ("https://example.com/a%2Fb/", "https://example.com/a%2Fb"),
        ("http://[::1]:80/x", "http://[::1]/x"),
        ("  https://example.com/x  ", "https://example.com/x"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected


def test_trailing_slash_policy_can_be_turned_off() -> None:
    url = "https://example.com/docs/"
    assert normalize_url(url, strip_trailing_slash=False) == "https://example.com/docs/"
    assert normalize_url(url) == "https://example.com/docs"


def test_tracking_params_are_configurable() -> None:
    url = "https://example.com/?sid=1&utm_source=2&q=3"
    assert normalize_url(url, tracking_params=("sid",)) == "https://example.com/?q=3&utm_source=2"
    assert normalize_url(url, tracking_params=()) == "https://example.com/?q=3&sid=1&utm_source=2"


@pytest.mark.parametrize(
    "bad",
    [
        "/relative/path",
        "example.com/x",
        "ftp://example.com/",
        "mailto:a@b.c",
        "javascript:alert(1)",
        "data:text/html,hi",
        "file:///etc/passwd",
        "http://",
        "https://example.com:99999/",
        "",
    ],
)
def test_rejects_what_is_not_an_absolute_http_url(bad: str) -> None:
    with pytest.raises(ValueError):
        normalize_url(bad)


_query_part = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@settings(max_examples=400, deadline=None)
@given(urls())
def test_idempotent_on_generated_urls(url: str) -> None:
    once = normalize_url(url)
    assert normalize_url(once) == once


@settings(max_examples=400, deadline=None)
@given(
    host=st.sampled_from(["Example.COM", "bücher.de", "xn--bcher-kva.de", "127.0.0.1", "[::1]"]),
    port=st.sampled_from(["", ":80", ":443", ":8080"]),
    path=st.lists(_query_part, max_size=4).map("/".join),
    query=st.lists(st.tuples(_query_part, _query_part), max_size=5),
    slash=st.booleans(),
    strip=st.booleans(),
)
def test_idempotent_on_awkward_parts(
    host: str, port: str, path: str, query: list[tuple[str, str]], slash: bool, strip: bool
) -> None:
    qs = "&".join(f"{k}={v}" for k, v in query)
    url = f"http://{host}{port}/{path}{'/' if slash else ''}{'?' + qs if qs else ''}#frag"
    once = normalize_url(url, strip_trailing_slash=strip)
    assert normalize_url(once, strip_trailing_slash=strip) == once
    assert "#" not in once


_label = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
_segment = st.from_regex(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,8}", fullmatch=True)


@settings(max_examples=500, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    labels=st.lists(_label, min_size=1, max_size=3),
    port=st.one_of(st.none(), st.integers(1, 70000)),
    segments=st.lists(_segment, max_size=4),
)
def test_fast_path_agrees_with_the_full_rules(scheme, labels, port, segments) -> None:
    from increcrawl_scrapy.config import DEFAULT_TRACKING_PARAMS
    from increcrawl_scrapy.urls import _full_rules

    url = f"{scheme}://{'.'.join(labels)}{f':{port}' if port else ''}/{'/'.join(segments)}"
    for strip in (True, False):
        try:
            expected = _full_rules(url, DEFAULT_TRACKING_PARAMS, strip)
        except ValueError:
            with pytest.raises(ValueError):
                normalize_url(url, strip_trailing_slash=strip)
            continue
        assert normalize_url(url, strip_trailing_slash=strip) == expected


# Keys as w3lib up to 2.5 made them, under 2.6 too: a key must not move with w3lib,
# or a page's state row is orphaned. 2.6 reads a host ending in a number as IPv4
# ("0" is 0.0.0.0, "a.0" and "300.0" errors), decodes percent escapes in hosts, keeps
# "ß" in IDNA, and leaves a last "." or ".." segment before ";params".
@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("http://0/a", "http://0/a"),
        ("http://a.0/", "http://a.0/"),
        ("http://300.0:8080/a/", "http://300.0:8080/a"),
        ("http://127.1/", "http://127.1/"),
        ("http://0x7f.1/", "http://0x7f.1/"),
        ("http://01.2.3.4/", "http://01.2.3.4/"),
        ("http://b%2Ecom/", "http://b%2ecom/"),
        ("http://faß.de/", "http://fass.de/"),
        ("http://ςa.gr/", "http://xn--a-zmb.gr/"),
        ("http://[::FFFF:1.2.3.4]/", "http://[::ffff:102:304]/"),
        ("http://example.com/a/b/..;x", "http://example.com/a/;x"),
        ("http://example.com/a/.;x", "http://example.com/a/;x"),
        ("http://example.com/a/%2E%2E;x?b=1", "http://example.com/;x?b=1"),
        ("http://u:p@example.com/", "http://u:p@example.com/"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/a/../b", "https://example.com/b"),
        ("http://example.com\\a/b", "http://example.com/a/b"),
    ],
)
def test_keys_do_not_move_with_w3lib(raw: str, key: str) -> None:
    assert normalize_url(raw) == key
    assert normalize_url(key) == key


def test_fast_path_leaves_default_ports_to_the_full_rules() -> None:
    assert normalize_url("http://example.com:80/a") == "http://example.com/a"
    assert normalize_url("https://example.com:443/") == "https://example.com/"
    assert normalize_url("https://example.com:80/") == "https://example.com:80/"


@pytest.mark.parametrize(
    ("page", "canonical", "same"),
    [
        ("http://example.com/a", "https://example.com/a", True),
        ("http://example.com/a", "https://www.example.com/a", True),
        ("https://www.example.com/a", "http://example.com/a", True),
        ("http://example.com:8080/a", "https://example.com:8080/a", True),
        ("http://example.com/a", "https://example.com/b", False),
        ("http://example.com/a", "http://example.com/", False),
        ("http://example.com:8080/a", "http://example.com/a", False),
        ("http://shop.example.com/a", "http://example.com/a", False),
    ],
)
def test_a_canonical_is_the_page_itself_up_to_scheme_and_www(
    page: str, canonical: str, same: bool
) -> None:
    assert same_page(normalize_url(page), normalize_url(canonical)) is same
