from __future__ import annotations

import pytest

from increcrawl_scrapy.config import ConfigError
from increcrawl_scrapy.fingerprint import content_fingerprint, stable_text

PAGE = """# Spring sale

Published 2024-03-01T09:15:22.123456+01:00, updated 2024-03-02 10:00Z.

csrf_token: "9f8e7d6c5b4a3921"
Your session=AbCdEf0123456789

We sell   apples and pears.

## Related posts

- [Autumn sale](/autumn)

### Older

- [Winter](/winter)

## Contact

Write to us.
"""


def rerender(page: str) -> str:
    return (
        page.replace("2024-03-01T09:15:22.123456+01:00", "2025-11-29T20:01Z")
        .replace("2024-03-02 10:00Z", "2025-11-29T20:01:02-05:00")
        .replace("9f8e7d6c5b4a3921", "0000111122223333")
        .replace("AbCdEf0123456789", "zzzzzzzzzzzz")
        .replace("Autumn sale", "Summer sale")
        .replace("Winter", "Spring")
        .replace("apples and pears", "apples  and\tpears")
        + "\n\n\n"
    )


def test_same_page_rendered_twice_has_one_fingerprint() -> None:
    assert content_fingerprint(PAGE) == content_fingerprint(rerender(PAGE))


def test_one_word_edit_changes_it() -> None:
    assert content_fingerprint(PAGE) != content_fingerprint(PAGE.replace("pears", "plums"))
    assert content_fingerprint(PAGE) != content_fingerprint(PAGE.replace("Write to", "Mail"))


def test_related_section_ends_at_the_next_heading_of_its_level() -> None:
    text = stable_text(PAGE)
    assert "Autumn" not in text and "Winter" not in text
    assert "## Contact" in text and "Write to us." in text


@pytest.mark.parametrize(
    "stamp",
    [
        "2024-03-01T09:15",
        "2024-03-01T09:15:22",
        "2024-03-01T09:15:22.5Z",
        "2024-03-01 09:15:22+0200",
        "2024-03-01T09:15:22,123-07:00",
        "2024-03-01T09:15Z",
    ],
)
def test_iso_timestamps_are_volatile(stamp: str) -> None:
    assert stable_text(f"Updated {stamp} ok") == "Updated ok"


def test_html_token_attributes_are_volatile() -> None:
    html = '<input name="csrfmiddlewaretoken" value="{}">\n<meta name="csrf-token" content="{}">'
    one, two = html.format("abc123def", "x1"), html.format("zzz999yyy", "y2")
    assert content_fingerprint(one) == content_fingerprint(two)


def test_blank_lines_and_line_ends_do_not_matter() -> None:
    assert content_fingerprint("a\r\n\r\n  b  \n") == content_fingerprint("a\nb")


def test_plain_dates_are_content() -> None:
    # A date without a time is usually what the page is about (an event, a deadline).
    assert content_fingerprint("Due 2024-03-01") != content_fingerprint("Due 2024-03-02")


def test_user_patterns_extend_the_defaults() -> None:
    one, two = "Views: 120\nText", "Views: 121\nText"
    assert content_fingerprint(one) != content_fingerprint(two)
    assert content_fingerprint(one, [r"^Views: \d+$"]) == content_fingerprint(
        two, [r"^Views: \d+$"]
    )


def test_invalid_user_pattern_names_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"INCRECRAWL_VOLATILE_PATTERNS='\(oops'"):
        content_fingerprint("x", ["(oops"])


def test_is_sha256_hex() -> None:
    digest = content_fingerprint("x")
    assert len(digest) == 64 and int(digest, 16) >= 0
