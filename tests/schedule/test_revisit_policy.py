"""The learned revisit policy and the trust in sitemap dates, per host: scripted
fetch histories through the real state store, and a whole crawl of a site whose
CMS stamps every date at a deploy."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import pytest_twisted

from increcrawl_scrapy.schedule.policy import LearnedPolicy, RevisitPolicy, lastmod_verdict
from increcrawl_scrapy.schedule.rows import NOISY, STALE, TRUSTED, UNKNOWN
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.state.lastmod import LastmodRules
from increcrawl_scrapy.stats import LASTMOD_SAMPLED
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

SEED = "https://example.com/sitemap.xml"
HOUR, DAY = 3600.0, 86400.0
PAGES = [f"https://example.com/p{i}" for i in range(40)]


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def store(tmp_path: Path, clock: Clock):
    with StateStore(
        tmp_path / "p.sqlite",
        clock=clock,
        policy=LearnedPolicy(),
        lastmod=LastmodRules(min_evidence=10, wave_share=0.5, sample=0.0),
    ) as opened:
        yield opened


class Story:
    """Discover every hour; each page's date and content move as the script says."""

    def __init__(self, store: StateStore, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self.dates = {url: iso(clock.now - 30 * DAY) for url in PAGES}
        self.versions = dict.fromkeys(PAGES, 0)

    def run(self) -> int:
        """One hourly run; how many pages it fetched."""
        run = self.store.start_run(SEED)
        run.upsert(list(self.dates.items()))
        self.report = run.apply_lastmod()
        run.mark_missing()
        due = self.store.due(SEED)
        for page in due:
            self.store.record(
                page.url,
                200,
                seed=SEED,
                key=page.normalized_url,
                content_hash=str(self.versions[page.url]),
            )
        self.store.flush()
        self.clock.advance(HOUR)
        return len(due)

    def earn_trust(self) -> None:
        """Twelve hours in which two pages are edited and their dates move with them,
        then a day later, so the quiet pages are fetched once under trusted dates."""
        self.run()
        for _ in range(12):
            for url in PAGES[:2]:
                self.versions[url] += 1
                self.dates[url] = iso(self.clock.now)
            self.run()
        assert self.verdict() == TRUSTED
        self.clock.advance(DAY)
        self.run()

    def verdict(self) -> str:
        return self.store.hosts.verdict("example.com")

    def fetched(self, url: str) -> float | None:
        return self.store.get(url).last_fetched


def test_verdicts_from_the_counts() -> None:
    assert lastmod_verdict(3, 0, 0, min_evidence=10) == UNKNOWN
    assert lastmod_verdict(4, 0, 0, min_evidence=10) == TRUSTED  # clean: trusted early
    assert lastmod_verdict(5, 1, 0, min_evidence=10) == UNKNOWN
    assert lastmod_verdict(5, 0, 1, min_evidence=10) == UNKNOWN
    assert lastmod_verdict(20, 1, 1, min_evidence=10) == TRUSTED
    assert lastmod_verdict(5, 20, 0, min_evidence=10) == NOISY
    assert lastmod_verdict(5, 0, 20, min_evidence=10) == STALE
    assert lastmod_verdict(14, 4, 4, min_evidence=10) == UNKNOWN  # in between


def test_honest_dates_earn_trust(store: StateStore, clock: Clock) -> None:
    story = Story(store, clock)
    story.run()
    for _ in range(12):
        for url in PAGES[:2]:  # two pages edited, their dates move with them
            story.versions[url] += 1
            story.dates[url] = iso(clock.now)
        story.run()
        assert story.fetched(PAGES[0]) == clock.now - HOUR  # caught the next hour
    assert story.verdict() == TRUSTED


def test_dates_that_move_without_changes_are_noisy(store: StateStore, clock: Clock) -> None:
    story = Story(store, clock)
    story.run()
    for _ in range(12):
        for url in PAGES[:2]:
            story.dates[url] = iso(clock.now)  # the date moves, the text does not
        story.run()
    assert story.verdict() == NOISY
    story.run()  # whatever its own schedule made due is fetched
    assert store.get(PAGES[0]).next_check > clock.now
    story.dates[PAGES[0]] = iso(clock.now)
    before = story.fetched(PAGES[0])
    story.run()
    assert story.fetched(PAGES[0]) == before  # a noisy host's moves make nothing due


def test_changes_without_moves_make_dates_stale(store: StateStore, clock: Clock) -> None:
    story = Story(store, clock)
    story.run()
    for fetch in range(24):
        clock.advance(2 * DAY)  # the pages come due on their own
        for url in PAGES:
            story.versions[url] += fetch % 2  # every other fetch: edits, not noise
        story.run()
    assert story.verdict() == STALE
    assert store.unannounced(SEED) == (0, [])


def test_noise_on_a_trusted_host_is_no_evidence_and_is_listed(
    store: StateStore, clock: Clock
) -> None:
    story = Story(store, clock)
    story.run()
    noisy = PAGES[10:20]
    for _ in range(10):
        clock.advance(2 * DAY)
        for url in PAGES[:6]:  # real edits, announced
            story.versions[url] += 1
            story.dates[url] = iso(clock.now)
        for url in noisy:  # a counter the volatile rules miss: new text at every fetch
            story.versions[url] += 1
        story.run()
    assert story.verdict() == TRUSTED
    # changes at every fetch without a move: none counts against the dates
    assert store.hosts._load("example.com")[2] == 0
    count, examples = store.unannounced(SEED)
    assert count == 10 and examples == sorted(noisy)[:5]
    page = store.get(noisy[0])  # its schedule follows its dates, not its noise
    assert page.next_check - page.last_fetched > 650 * DAY  # two years, jittered


def test_a_wave_is_not_taken_as_changes(store: StateStore, clock: Clock) -> None:
    story = Story(store, clock)
    story.run()
    stamp = iso(clock.now)
    for url in PAGES:  # a deploy stamps every date at once...
        story.dates[url] = stamp
    story.versions[PAGES[0]] += 1  # ...while one page really changes, a minute later
    story.dates[PAGES[0]] = iso(clock.now + 60)
    clock.advance(120)
    run = store.start_run(SEED)
    run.upsert(list(story.dates.items()))
    report = run.apply_lastmod()
    assert [(host, n) for host, _minute, n in report.waves] == [("example.com", 39)]
    assert report.moved == 40 and report.due == 1
    assert [p.url for p in store.due(SEED)] == [PAGES[0]]
    assert store.get(PAGES[1]).lastmod_moved is False  # a wave is no evidence either


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_trusted_host_that_starts_lying_is_demoted(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, backend: str
) -> None:
    # On PostgreSQL too: the demotion's statement is run there (it once stopped every
    # later write of the crawl, the statement being SQLite's).
    where = (
        request.getfixturevalue("postgres_dsn")
        if backend == "postgresql"
        else str(tmp_path / "p.sqlite")
    )
    rules = LastmodRules(min_evidence=10, wave_share=0.5, sample=0.0)
    with StateStore(where, clock=clock, policy=LearnedPolicy(), lastmod=rules) as store:
        _lying_host_is_demoted(store, clock)


def _lying_host_is_demoted(store: StateStore, clock: Clock) -> None:
    story = Story(store, clock)
    story.earn_trust()
    # A quiet page fetched while the dates were trusted waits for them (two years)...
    quiet = story.store.get(PAGES[30])
    assert quiet.next_check - quiet.last_fetched > 650 * DAY  # two years, jittered
    for _ in range(40):  # now dates move for nothing
        for url in PAGES[2:5]:
            story.dates[url] = iso(clock.now)
        story.run()
    assert story.verdict() == NOISY
    # ...and no longer once they lost their trust.
    quiet = story.store.get(PAGES[30])
    assert quiet.next_check <= quiet.last_fetched + LearnedPolicy().stable_max_interval


def test_a_trusted_host_is_sampled_once_a_day(tmp_path: Path, clock: Clock) -> None:
    rules = LastmodRules(min_evidence=10, wave_share=0.5, sample=0.25)
    with StateStore(
        tmp_path / "s.sqlite", clock=clock, policy=LearnedPolicy(), lastmod=rules
    ) as store:
        story = Story(store, clock)
        story.earn_trust()  # the quiet pages now wait two years
        sampled, fetched = [], 0
        for _ in range(72):
            fetched += story.run()
            sampled.append(story.report.sampled)
        assert sum(1 for n in sampled if n) == 3  # once a day
        assert 20 <= sum(sampled) <= 35  # a quarter of the ~38 waiting pages a day
        assert fetched == sum(sampled)  # nothing else was due: the dates did not move


def test_a_date_in_the_future_is_clamped_and_counted(store: StateStore, clock: Clock) -> None:
    run = store.start_run(SEED)
    run.upsert([(PAGES[0], "2999-01-01T00:00:00Z")])
    assert store.get(PAGES[0]).sitemap_lastmod == iso(clock.now)
    clock.advance(HOUR)
    run = store.start_run(SEED)
    run.upsert([(PAGES[0], "2999-01-01T00:00:00Z")])
    assert run.apply_lastmod().moved == 0  # never a move, run after run
    row = store.database.execute("SELECT future_dates FROM hosts").fetchone()
    assert row[0] == 2


def test_the_learned_policy_slows_down_for_stable_pages() -> None:
    from increcrawl_scrapy.schedule.estimator import History, observe
    from increcrawl_scrapy.schedule.policy import new_page
    from increcrawl_scrapy.schedule.rows import Outcome

    policy, adaptive = LearnedPolicy(), RevisitPolicy()
    page = new_page("https://e.com/a", "https://e.com/a", SEED, 0.0, DAY)
    history, now, intervals = History(), 0.0, []
    for _ in range(12):
        interval = policy.interval_after(page, Outcome.UNCHANGED, history, now, UNKNOWN)
        intervals.append(interval)
        now += interval
        history = observe(history, interval, changed=False)
        page = page._replace(interval_s=interval, fetch_count=page.fetch_count + 1)
    # Too little history: the adaptive rule; then longer and longer, within bounds.
    assert intervals[0] == adaptive.next_interval(DAY, Outcome.UNCHANGED)
    assert intervals[-1] > 8 * intervals[0]
    assert intervals[-1] <= policy.stable_max_interval


@pytest_twisted.ensureDeferred
async def test_a_deploy_wave_fetches_nothing_extra_and_real_edits_are_caught(
    tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=36, lastmod_mode="mixed") as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(first.changes("new")) == 36
        site.deploy()  # every date stamped at once...
        deployed = site._deployed_at
        site.edit(4, at=deployed + 120)  # ...and two real edits, with their own dates
        site.edit(5, at=deployed + 180)
        clock.advance(HOUR)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        edited = {site.page_url(4), site.page_url(5)}
    assert second.stats["increcrawl/lastmod/waves"] == 1
    verdicts = [line for line in second.log if "Sitemap dates of 127.0.0.1:" in line]
    assert verdicts and "unknown (moved and changed 2, moved for nothing 0" in verdicts[0]
    assert "1 waves" in verdicts[0]
    assert second.stats["increcrawl/due"] == 2  # the wave made nothing else due
    assert second.changes("changed") == edited


def test_a_date_only_lastmod_of_a_day_begun_east_of_utc_is_not_a_move(
    store: StateStore, clock: Clock
) -> None:
    # 22:30 UTC: in UTC+10 it is already the next day, whose date a site there
    # writes. That date is no date in the future, and no move once UTC reaches it.
    day = 86_400
    clock.now = (clock.now // day) * day + 22.5 * HOUR
    tomorrow = datetime.fromtimestamp(clock.now + day, timezone.utc).strftime("%Y-%m-%d")
    lastmod = f"{tomorrow}T00:00:00Z"
    run = store.start_run(SEED)
    run.upsert([(PAGES[0], lastmod)])
    assert store.get(PAGES[0]).sitemap_lastmod == lastmod
    clock.advance(3 * HOUR)  # 01:30 UTC, the next day
    run = store.start_run(SEED)
    run.upsert([(PAGES[0], lastmod)])
    assert run.apply_lastmod().moved == 0
    row = store.database.execute("SELECT future_dates FROM hosts").fetchone()
    assert row is None or row[0] == 0


@pytest_twisted.ensureDeferred
async def test_a_host_whose_listings_move_with_their_newest_entry_is_trusted_in_its_first_week(
    tmp_path: Path, clock: Clock
) -> None:
    """Hugo's shape: two real edits a day, their dates moving with them, and two
    listing pages dated by their newest entry, so their dates move every day (to
    the date of the day's newest edit) while their own content (a list of titles)
    stands still. A move to an edited page's date echoes that edit: no evidence
    against the dates, so the host is trusted at its third daily read, and the
    pages scheduled before then wait for their dates."""
    listings = (1, 2)
    with SampleSite(pages=40) as site:
        settings = crawl_settings(str(tmp_path / "h.sqlite"), clock, INCRECRAWL_POLICY="learned")
        edited = [i for i in range(4, 40) if site.lastmod(i) is not None]
        verdicts, fetched = [], []
        for day in range(8):
            today = edited[2 * day - 2 : 2 * day] if day else []
            if day:
                clock.advance(DAY)
                for page in today:
                    site.edit(page, at=clock.now - HOUR)
                for page in listings:
                    site.bump_lastmod(page, at=clock.now - HOUR)
            before = site.fetched.copy()
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            verdicts.append([line for line in result.log if "Sitemap dates of 127.0.0.1:" in line])
            dated = {f"/page/{i}" for i in range(40) if site.lastmod(i) is not None}
            sampled = result.stats.get(LASTMOD_SAMPLED, 0)  # the trusted host's sample
            fetched.append(
                (set(site.fetched - before) & dated, {f"/page/{i}" for i in today}, sampled)
            )
        assert ": trusted" in verdicts[2][0], verdicts  # the third daily read
        # From the fourth day on, of the 26 dated pages, those whose dates moved (the
        # day's two edits and the two listings) and at most four more: the last two
        # days' edits, checked again soon after their change (a page seen changing
        # waits at the stricter target, its interval jittered onto one day or the
        # next), and the pages of the trusted host's random sample. Before the trust:
        # all of them, on the learned schedule's early checks.
        for seen, edits, sampled in fetched[3:]:
            assert edits | {f"/page/{i}" for i in listings} <= seen, (seen, edits)
            assert len(seen) <= 8 + sampled, fetched
        assert len(fetched[1][0]) > 20


def test_a_trusted_host_whose_dates_go_stale_is_demoted(store: StateStore, clock: Clock) -> None:
    # Quiet pages edited without their dates moving: each such change is held until
    # the page's next fetch confirms it stood alone. That fetch comes within a day,
    # not after the trusted hosts' two years, so the evidence counts and the host
    # loses its trust.
    story = Story(store, clock)
    story.earn_trust()
    quiet = PAGES[10:30]
    for url in quiet:  # edited, their dates standing still
        story.versions[url] += 1
        store.make_due(url=url)  # as the trusted hosts' daily sample would
    assert story.run() == len(quiet)
    for url in quiet:
        page = store.get(url)
        assert page.unannounced == 1
        assert page.next_check - page.last_fetched <= 2 * DAY
    for _ in range(48):
        story.run()
    assert store.hosts._load("example.com")[2] >= len(quiet)
    assert story.verdict() != TRUSTED


def test_a_page_whose_habit_changes_is_checked_at_its_new_pace_within_weeks() -> None:
    """Two years stable, then edited daily: old evidence fades, so within four weeks
    of the first fetch that sees an edit the page is checked at least weekly
    (without fading: 438 days)."""
    from increcrawl_scrapy.schedule.policy import apply_result, new_page
    from increcrawl_scrapy.schedule.rows import FetchResult, Outcome

    policy, week = LearnedPolicy(), 7 * DAY
    page = new_page("https://e.com/a", "https://e.com/a", SEED, 0.0, DAY)
    page = apply_result(page, FetchResult(Outcome.NEW, 200, "v0"), 0.0, policy)
    edited_from = 730 * DAY
    while page.next_check < edited_from:
        page = apply_result(
            page, FetchResult(Outcome.UNCHANGED, 200, "v0"), page.next_check, policy
        )
    assert page.interval_s > 60 * DAY  # it earned its long wait
    seen = page.next_check  # the first fetch since the edits began
    while page.next_check < seen + 4 * week:
        at = page.next_check
        page = apply_result(page, FetchResult(Outcome.CHANGED, 200, f"v{at}"), at, policy)
    assert page.interval_s <= week


@pytest_twisted.ensureDeferred
async def test_an_honest_host_is_trusted_within_three_sitemap_reads(
    tmp_path: Path, clock: Clock
) -> None:
    """Two real edits a day, their dates moving with them, nothing said falsely:
    clean evidence earns trust by the third daily read (a real Hugo site's first
    week), and the pages the dates leave alone then wait for them."""
    with SampleSite(pages=40) as site:
        settings = crawl_settings(str(tmp_path / "h.sqlite"), clock, INCRECRAWL_POLICY="learned")
        verdicts = []
        for day in range(3):
            if day:
                clock.advance(DAY)
                for page in (3 * day - 2, 3 * day - 1):  # pages with a sitemap date
                    site.edit(page, at=clock.now - HOUR)
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            verdicts.append([line for line in result.log if "Sitemap dates of 127.0.0.1:" in line])
        assert result.changes("changed") == {site.page_url(4), site.page_url(5)}
        assert (
            "moved and changed 4, moved for nothing 0, changed without a move 0" in (verdicts[2][0])
        )
        assert "unknown" in verdicts[1][0]
        assert ": trusted" in verdicts[2][0], verdicts[2]
        clock.advance(DAY)
        await run_crawl(settings, sitemap_url=site.sitemap_url)  # on the old schedule
        clock.advance(20 * DAY)
        quiet = await run_crawl(settings, sitemap_url=site.sitemap_url)
    undated = sum(1 for i in range(40) if site.lastmod(i) is None)
    # The dated pages wait for dates, but for the host's sample (a quarter of a page
    # expected over these 20 days, rounded at random: sometimes one).
    sampled = quiet.stats.get(LASTMOD_SAMPLED, 0)
    assert sampled <= 1
    assert 0 < quiet.stats["increcrawl/due"] - sampled <= undated


@pytest_twisted.ensureDeferred
async def test_a_trusted_host_whose_sample_finds_unannounced_changes_is_demoted(
    tmp_path: Path, clock: Clock
) -> None:
    """A trusted host whose sitemap stops moving while its pages keep changing daily:
    the daily sample of unmoved pages finds those changes. Each counts against the
    dates when found; held for a later fetch, which finds the page changed again
    (noise, by that rule), none ever counted and the host stayed trusted."""
    with SampleSite(pages=40) as site:
        db = str(tmp_path / "h.sqlite")
        settings = crawl_settings(
            db, clock, INCRECRAWL_POLICY="learned", INCRECRAWL_LASTMOD_SAMPLE=0.2
        )
        for day in range(3):  # honest dates earn trust (the third daily read)
            if day:
                clock.advance(DAY)
                for page in (3 * day - 2, 3 * day - 1):
                    site.edit(page, at=clock.now - HOUR)
            await run_crawl(settings, sitemap_url=site.sitemap_url)
        with StateStore(db) as store:
            assert store.hosts.verdict(urlsplit(site.url).netloc) == TRUSTED
        dated = [i for i in range(40) if site.lastmod(i) is not None]
        sampled = 0
        for _ in range(6):  # then every dated page changes daily, its date still
            clock.advance(DAY)
            for page in dated:
                site.edit_quietly(page)
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            sampled += result.stats.get(LASTMOD_SAMPLED, 0)
        assert sampled >= 3
        with StateStore(db) as store:
            assert store.hosts.verdict(urlsplit(site.url).netloc) != TRUSTED


def test_a_sampled_change_not_delivered_is_counted_once(tmp_path: Path, clock: Clock) -> None:
    # A result held until its item is delivered, then discarded (a later pipeline
    # dropped the item): its evidence is taken back; the next fetch of the same change
    # counts it (from a review: counted twice).
    db, url, seed = str(tmp_path / "s.sqlite"), "https://site.test/a", "https://site.test/s.xml"
    with StateStore(db, clock=clock) as store:
        run = store.start_run(seed)
        run.upsert([(url, "2026-01-01"), (url + "/other", None)])
        store.record(url, 200, seed=seed, content_hash="a")
        run.finish({}, discovery_complete=True)
    clock.advance(3 * DAY)
    with StateStore(db, clock=clock) as store:  # as the trusted host's sample leaves it
        store.database.execute("UPDATE pages SET sampled = 1, next_check = 0")
    for attempt in range(2):
        with StateStore(db, clock=clock) as store:
            run = store.start_run(seed)
            store.record(url, 200, seed=seed, content_hash="b", until_delivered=True)
            store.record(url + "/other", 200, seed=seed, content_hash=f"o{attempt}")
            if attempt == 0:
                store.discard(store.normalize(url))
            else:
                store.deliver(store.normalize(url))
            run.finish({}, discovery_complete=True)
        clock.advance(DAY)
    with StateStore(db, clock=clock) as store:
        assert store.hosts._load("site.test")[2] == 1  # changed without a move: once


def test_after_a_change_a_page_whose_rate_is_known_waits_at_the_target() -> None:
    """Right after its first change seen the next check comes at the stricter odds
    (0.1: the page may have woken up); once its estimate counts earlier changes
    (KNOWN_CHANGES, this one included) the target holds, unless the fetch before
    found a change too (a streak: the estimate is behind)."""
    from increcrawl_scrapy.schedule.estimator import History, change_rate, interval_for, observe
    from increcrawl_scrapy.schedule.policy import CHANGED_PROBABILITY, KNOWN_CHANGES, new_page
    from increcrawl_scrapy.schedule.rows import Outcome

    policy = LearnedPolicy()
    page = new_page("https://e.com/a", "https://e.com/a", SEED, 0.0, DAY)
    page = page._replace(fetch_count=40, last_fetched=0.0, first_seen=0.0)

    def wait_after_a_change(changes: int, streak: int = 0) -> tuple[float, float]:
        history = History()
        for k in range(36):
            history = observe(history, DAY, changed=k % 6 == 0 and k // 6 < changes - 1)
        history = observe(history, DAY, changed=True)  # this fetch's change
        rate = change_rate(history, policy.default_interval)
        row = page._replace(change_streak=streak)
        got = policy.interval_after(row, Outcome.CHANGED, history, 40 * DAY, UNKNOWN)
        return got, rate

    few, rate = wait_after_a_change(KNOWN_CHANGES - 1)
    assert few == pytest.approx(interval_for(rate, CHANGED_PROBABILITY), rel=0.06)
    known, rate = wait_after_a_change(KNOWN_CHANGES)
    assert known == pytest.approx(interval_for(rate, policy.target_probability), rel=0.06)
    streak, rate = wait_after_a_change(KNOWN_CHANGES, streak=1)
    assert streak == pytest.approx(interval_for(rate, CHANGED_PROBABILITY), rel=0.06)
