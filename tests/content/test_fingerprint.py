from __future__ import annotations

import pytest

from increcrawl_scrapy.config import ConfigError
from increcrawl_scrapy.content.fingerprint import content_fingerprint, stable_text

PAGE = """# Spring sale

Rendered at 2024-03-01T09:15:22.123456+01:00

csrf_token: "9f8e7d6c5b4a3921"
Your sessionid=AbCdEf0123456789

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
        .replace("9f8e7d6c5b4a3921", "0000111122223333")
        .replace("AbCdEf0123456789", "zzzz9zzzzzzz")
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


@pytest.mark.parametrize("level", range(1, 7))
def test_related_sections_at_every_heading_level(level: int) -> None:
    marks = "#" * level
    page = f"{marks} Related articles\n\n- [{{}}](/x)\n\n{marks} Next\n\nBody"
    assert content_fingerprint(page.format("One")) == content_fingerprint(page.format("Two"))
    assert "Next" in stable_text(page.format("One"))
    deeper = f"{marks} Related posts\n\n- x\n\n{'#' * (level + 1)} Sub\n\n- y\n\n{marks} End"
    assert stable_text(deeper) == f"{marks} End"


#: Pairs rendered twice: only what is volatile by construction differs.
SAME = [
    ("Rendered at 2024-03-01T09:15:22Z", "Rendered at 2025-01-02T10:00:01Z"),
    ("Rendered at 2024-03-01T09:15", "Rendered at 2024-03-01T09:16"),
    ("Page generated on 2024-03-01 09:15:22 UTC", "Page generated on 2024-03-02 11:00:00 UTC"),
    ("Generated: 2024-03-01T09:15:22.5+02:00", "Generated: 2024-03-01T09:15:23,1-07:00"),
    ("Served at 2024-03-01 09:15Z by node 4", "Served at 2024-03-01 09:17Z by node 4"),
    ("Cached on 2024-03-01T09:15:22", "Cached on 2024-03-09T00:00:00"),
    ("Page rendered in 123 ms", "Page rendered in 98 ms"),
    ("Generated in 0.42 s", "Generated in 1.07 s"),
    ("csrf_token=9f8e7d6c5b4a3921", "csrf_token=0123456789abcdef"),
    ('csrfToken: "a1b2c3d4e5f6"', 'csrfToken: "ffffeeee1111"'),
    ("X-CSRF-Token: abcd1234efgh", "X-CSRF-Token: zyxw9876vuts"),
    ("_xsrf=2|d3adb33f|0123", "_xsrf=2|f00dfeed|4567"),
    ("nonce=7f3e9a1b22", "nonce=0c4d5e6f77"),
    ('script nonce="r4nd0mN0nce=="', 'script nonce="an0therOne+/="'),
    ("JSESSIONID=A1B2C3D4E5F6", "JSESSIONID=F6E5D4C3B2A1"),
    ("PHPSESSID=k3j4h5g6f7d8", "PHPSESSID=a1s2d3f4g5h6"),
    ("session_id: 0a1b2c3d4e5f", "session_id: 9z8y7x6w5v4u"),
    ("authenticity_token=Zm9vYmFy1234", "authenticity_token=YmF6cXV42222"),
    (
        '<input type="hidden" name="csrfmiddlewaretoken" value="abc123def">',
        '<input type="hidden" name="csrfmiddlewaretoken" value="zzz999yyy">',
    ),
    ('<meta name="csrf-token" content="x1x1x1x1">', '<meta name="csrf-token" content="y2y2y2y2">'),
    ("![logo](/static/logo.png?v=3f2a9)", "![logo](/static/logo.png?v=77b01)"),
    ("[styles](/app.css?ver=1700000000)", "[styles](/app.css?ver=1700003600)"),
    ("[script](/main.js?_=1699999999999)", "[script](/main.js?_=1700000000001)"),
    ("1,234 views", "1,240 views"),
    ("Views: 1234", "Views: 1301"),
    ("Viewed 12 times", "Viewed 15 times"),
    ("Text\n\n## Related posts\n\n- [A](/a)", "Text\n\n## Related posts\n\n- [B](/b)"),
]

#: Real edits that merely look like a date, a time, a token or a counter.
DIFFERENT = [
    ("Next session: Monday", "Next session: Friday"),
    ("Parliamentary session: 2023-2024", "Parliamentary session: 2024-2025"),
    ("The talk starts 10:00 UTC", "The talk starts 14:00 UTC"),
    ("Published 2024-03-01T09:15:22Z", "Published 2024-03-02T09:15:22Z"),
    ("Deadline: 2024-03-01 17:00", "Deadline: 2024-03-08 17:00"),
    ("Updated 2024-03-01T09:15", "Updated 2024-03-01T11:15"),
    ("Due 2024-03-01", "Due 2024-03-02"),
    ("Doors open at 2024-05-01T18:00+02:00", "Doors open at 2024-05-01T19:00+02:00"),
    ("Order number: A1B2C3D4E5", "Order number: A1B2C3D4E6"),
    ("Token sale ends soon: price 0.25", "Token sale ends soon: price 0.30"),
    ("Promo code=SPRING2024", "Promo code=SUMMER2024"),
    ("Session chair: Dr. Lee", "Session chair: Dr. Kim"),
    ("Session 3: 14:00-15:30", "Session 3: 15:00-16:30"),
    ("Tracking number 1Z999AA10123456784", "Tracking number 1Z999AA10123456785"),
    (
        "We offer 3 views of the valley from the terrace",
        "We offer 4 views of the valley from the terrace",
    ),
    ("Population: 1234", "Population: 1301"),
    ("Price: 1,234 EUR", "Price: 1,240 EUR"),
    ("The film was viewed by critics as a triumph", "The film was viewed by critics as a failure"),
    ("![map](/img/map.png?zoom=3)", "![map](/img/map.png?zoom=4)"),
    ("[Report](/report.pdf?year=2023)", "[Report](/report.pdf?year=2024)"),
    ("Served with rice since 1990", "Served with noodles since 1990"),
    ("Generated electricity: 120 MW", "Generated electricity: 150 MW"),
    ("Related: apples", "Related: pears"),
    ("## Related work\n\nSmith 2020", "## Related work\n\nJones 2021"),
    ("SID card 12345678 issued", "SID card 12345679 issued"),
]


def test_the_corpus_is_large_enough() -> None:
    assert len(SAME) >= 20 and len(DIFFERENT) >= 20 and len(SAME) + len(DIFFERENT) >= 40


@pytest.mark.parametrize(("one", "two"), SAME)
def test_volatile_only_pairs_fingerprint_equal(one: str, two: str) -> None:
    text = "# A page\n\nBody text.\n\n{}\n\nMore text."
    assert content_fingerprint(text.format(one)) == content_fingerprint(text.format(two))


@pytest.mark.parametrize(("one", "two"), DIFFERENT)
def test_real_edits_that_look_volatile_fingerprint_different(one: str, two: str) -> None:
    text = "# A page\n\nBody text.\n\n{}\n\nMore text."
    assert content_fingerprint(text.format(one)) != content_fingerprint(text.format(two))


def test_blank_lines_and_line_ends_do_not_matter() -> None:
    assert content_fingerprint("a\r\n\r\n  b  \n") == content_fingerprint("a\nb")


def test_plain_dates_are_content() -> None:
    # A date without a time is usually what the page is about (an event, a deadline).
    assert content_fingerprint("Due 2024-03-01") != content_fingerprint("Due 2024-03-02")


def test_user_patterns_extend_the_defaults() -> None:
    one, two = "Likes: 120\nText", "Likes: 121\nText"
    assert content_fingerprint(one) != content_fingerprint(two)
    assert content_fingerprint(one, [r"^Likes: \d+$"]) == content_fingerprint(
        two, [r"^Likes: \d+$"]
    )


def test_invalid_user_pattern_names_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"INCRECRAWL_VOLATILE_PATTERNS='\(oops'"):
        content_fingerprint("x", ["(oops"])


def test_is_sha256_hex() -> None:
    digest = content_fingerprint("x")
    assert len(digest) == 64 and int(digest, 16) >= 0


def test_the_blanks_shortcut_takes_the_same_text_as_the_rule() -> None:
    # Pages without runs of blanks, tabs or no-break spaces skip the blanks rule:
    # what they fingerprint must be what the rule would have left.
    import random
    import re

    from increcrawl_scrapy.content.fingerprint import _BLANKS

    def by_the_rule(text: str) -> str:
        lines = (line.strip() for line in _BLANKS.sub(" ", text).split("\n"))
        return "\n".join(filter(None, lines))

    pieces = ["a", "word", " ", "  ", "\t", "\u00a0", "\n", "\n\n", " \n ", "\u2003", "\x0b"]
    chance = random.Random(24)
    for _ in range(2000):
        text = "".join(chance.choice(pieces) for _ in range(chance.randint(0, 30)))
        assert stable_text(text) == by_the_rule(text), repr(text)
    assert re.search(_BLANKS, "a b") is None  # the common case: nothing to replace
