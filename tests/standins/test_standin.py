"""The stand-in Geonode API: every documented endpoint, status, error shape and knob."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from increcrawl_scrapy.testing.api_shapes import EXTRACTION_ERRORS

KEY = {"X-Api-Key": "test-key"}


def post(api: GeonodeStandIn, path: str, body: object, **kwargs) -> requests.Response:
    kwargs.setdefault("timeout", 10)
    return requests.post(
        f"{api.url}{path}", json=body, headers=kwargs.pop("headers", KEY), **kwargs
    )


def get(api: GeonodeStandIn, path: str, **kwargs) -> requests.Response:
    return requests.get(
        f"{api.url}{path}", headers=kwargs.pop("headers", KEY), timeout=10, **kwargs
    )


def extract(api: GeonodeStandIn, url: str, *, wait: float = 10, **body) -> requests.Response:
    return post(api, "/v1/extract", {"url": url, "formats": ["markdown"], **body}, timeout=wait)


def poll_batch(api: GeonodeStandIn, job_id: str, until: str = "completed") -> list[dict]:
    seen = []
    for _ in range(200):
        body = get(api, f"/v1/batch/{job_id}").json()
        if not seen or seen[-1] != body["status"]:
            seen.append(body["status"])
        if body["status"] == until:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"batch never reached {until}: {seen}")


def test_health_needs_no_key(api: GeonodeStandIn) -> None:
    body = requests.get(f"{api.url}/health", timeout=5).json()
    assert body["status"] == "ok"


@pytest.mark.parametrize("headers", [{}, {"X-Api-Key": "wrong"}])
def test_bad_key_is_401_in_the_first_shape(api: GeonodeStandIn, headers: dict) -> None:
    answer = post(api, "/v1/extract", {"url": "http://127.0.0.1/"}, headers=headers)
    assert answer.status_code == 401
    body = answer.json()
    assert body["code"] == "AUTH_REQUIRED" and body["retryable"] is False
    assert set(body) == {"code", "message", "retryable", "correlation_id", "details"}


def test_sync_extract_returns_markdown_and_origin_status(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    answer = extract(api, site.page_url(2))
    assert answer.status_code == 200
    body = answer.json()
    assert body["data"]["markdown"].startswith("# Page 2")
    assert body["data"]["html"] is None
    assert body["metadata"]["http_status"] == 200
    assert body["metadata"]["url"] == site.page_url(2)
    assert body["tokens_charged"] == 1


def test_extract_formats_default_to_html(api: GeonodeStandIn, site: SampleSite) -> None:
    body = post(api, "/v1/extract", {"url": site.page_url(2)}).json()
    assert body["data"]["markdown"] is None
    assert body["data"]["html"].startswith("<!doctype html>")
    assert body["metadata"]["formats"] == ["html"]


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        ({"formats": ["markdown"]}, ["body", "url"], "missing"),
        ({"url": "http://127.0.0.1/", "formats": ["pdf"]}, ["body", "formats", 0], "enum"),
        ({"url": "http://127.0.0.1/", "timeout": 999}, ["body", "timeout"], "greater_than_equal"),
        (
            {"url": "http://127.0.0.1/", "processing_mode": "later"},
            ["body", "processing_mode"],
            "enum",
        ),
        ({"url": 5}, ["body", "url"], "string_type"),
    ],
)
def test_extract_validation_is_fastapi_shaped(
    api: GeonodeStandIn, body: dict, loc: list, kind: str
) -> None:
    answer = post(api, "/v1/extract", body)
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert {"loc": loc, "type": kind} in [{"loc": d["loc"], "type": d["type"]} for d in detail]
    assert all({"loc", "msg", "type"} <= set(d) for d in detail)


def test_invalid_json_is_422(api: GeonodeStandIn) -> None:
    answer = requests.post(
        f"{api.url}/v1/extract",
        data=b"{not json",
        headers={**KEY, "Content-Type": "application/json"},
        timeout=5,
    )
    assert answer.status_code == 422 and answer.json()["detail"][0]["type"] == "json_invalid"


def test_async_extract_is_polled_to_completion(api: GeonodeStandIn, site: SampleSite) -> None:
    answer = extract(api, site.page_url(2), processing_mode="async")
    assert answer.status_code == 202
    accepted = answer.json()
    assert (
        accepted["status"] == "queued"
        and accepted["status_url"] == f"/v1/extract/{accepted['job_id']}"
    )
    statuses = []
    for _ in range(100):
        body = get(api, accepted["status_url"]).json()
        statuses.append(body["status"])
        if body["status"] == "completed":
            break
        time.sleep(0.02)
    assert statuses[0] == "queued" and statuses[-1] == "completed"
    assert body["data"]["markdown"].startswith("# Page 2")
    assert body["metadata"]["processing_mode"] == "async"
    assert get(api, "/v1/extract/0000").status_code == 404


def test_conditional_headers_reach_the_origin_and_304_comes_back(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    answer = extract(api, site.page_url(0), headers={"If-None-Match": site.etag(0)})
    body = answer.json()
    assert answer.status_code == 200
    assert body["metadata"]["http_status"] == 304
    assert body["metadata"]["headers"] == {"If-None-Match": site.etag(0)}
    assert site.counters["status/304"] == 1 and site.conditional["/page/0"] == 1
    assert api.counters()["conditional_requests"] == 1


@pytest.mark.parametrize("status", [404, 410])
def test_origin_gone_in_both_reporting_modes(
    api: GeonodeStandIn, site: SampleSite, status: int
) -> None:
    site.delete(5, status=status)
    body = extract(api, site.page_url(5)).json()
    assert body["metadata"]["http_status"] == status and body["data"]["markdown"] is None
    api.configure(origin_status_mode="error")
    answer = extract(api, site.page_url(5))
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "UNPROCESSABLE_CONTENT" and error["retryable"] is False
    assert str(status) in error["message"] and error["details"] == {"http_status": str(status)}
    assert answer.json()["tokens_charged"] == 0


def test_non_loopback_targets_are_refused_without_a_fetch(api: GeonodeStandIn) -> None:
    for url in ("http://93.184.216.34/", "http://example.com/", "http://10.0.0.1/"):
        answer = extract(api, url)
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "INVALID_URL"
    assert api.counters()["origin_fetches"] == 0


def test_a_redirect_off_loopback_is_refused_too(api: GeonodeStandIn, site: SampleSite) -> None:
    site.redirect(1, "http://192.0.2.1/internal")  # refused before any connection
    site.redirect(2, site.page_url(3))  # loopback to loopback: followed
    answer = extract(api, site.page_url(1))
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "INVALID_URL"
    assert "192.0.2.1" in answer.json()["error"]["message"]
    followed = extract(api, site.page_url(2))
    assert followed.status_code == 200
    assert followed.json()["metadata"]["url"] == site.page_url(3)  # where it ended


def test_batch_lifecycle_and_paging(api: GeonodeStandIn) -> None:
    with SampleSite(pages=120) as site:
        urls = site.page_urls()
        answer = post(api, "/v1/batch", {"urls": urls})
        assert answer.status_code == 202
        accepted = answer.json()
        assert accepted["accepted_urls"] == 120 and accepted["invalid_urls"] == []
        assert poll_batch(api, accepted["job_id"]) == ["queued", "processing", "completed"]
        pages = []
        for page in (1, 2, 3):
            body = get(
                api, f"/v1/batch/{accepted['job_id']}", params={"page": page, "page_size": 50}
            ).json()
            pages.append(body["results"])
        assert [len(p) for p in pages] == [50, 50, 20]
        items = [item for page in pages for item in page]
        assert [item["input_index"] for item in items] == list(range(120))
        assert {item["url"] for item in items} == set(urls)
        assert all(item["status"] == "completed" and item["data"]["markdown"] for item in items)
        assert (
            body["completed_urls"] == 120 and body["token_summary"]["tokens_charged_total"] == 120
        )
        assert body["batch_config"]["formats"] == ["markdown"]  # the batch default


def test_batch_validation(api: GeonodeStandIn) -> None:
    assert post(api, "/v1/batch", {"urls": []}).json()["detail"][0]["type"] == "too_short"
    many = [f"http://127.0.0.1/{i}" for i in range(1001)]
    assert post(api, "/v1/batch", {"urls": many}).json()["detail"][0]["type"] == "too_long"
    accepted = post(api, "/v1/batch", {"urls": ["http://127.0.0.1:9/a", "not a url"]}).json()
    assert accepted["accepted_urls"] == 1 and accepted["invalid_urls"] == ["not a url"]
    strict = post(api, "/v1/batch", {"urls": ["not a url"], "ignore_invalid_urls": False})
    assert strict.status_code == 422
    answer = get(api, f"/v1/batch/{accepted['job_id']}", params={"page_size": 51})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "page_size"]
    assert get(api, "/v1/batch/deadbeef").status_code == 404


def test_batch_item_failures_and_cancel(api: GeonodeStandIn, site: SampleSite) -> None:
    api.inject("TIMEOUT", count=2, endpoint="batch_item")
    job = post(api, "/v1/batch", {"urls": site.page_urls()[:6]}).json()["job_id"]
    poll_batch(api, job)
    items = get(api, f"/v1/batch/{job}", params={"page_size": 50}).json()["results"]
    failed = [i for i in items if i["status"] == "failed"]
    assert len(failed) == 2 and {i["error_code"] for i in failed} == {"TIMEOUT"}
    assert requests.delete(f"{api.url}/v1/batch/{job}", headers=KEY, timeout=5).status_code == 409

    api.configure(batch_stall=True)
    job = post(api, "/v1/batch", {"urls": site.page_urls()[:6]}).json()["job_id"]
    assert poll_batch(api, job, until="processing")[-1] == "processing"
    cancelled = requests.delete(f"{api.url}/v1/batch/{job}", headers=KEY, timeout=5)
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    body = get(api, f"/v1/batch/{job}", params={"page_size": 50}).json()
    assert body["status"] == "cancelled" and body["cancelled_urls"] == 6


def test_map_finds_sitemap_and_page_links_on_the_host_only(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    body = post(api, "/v1/map", {"url": f"{site.url}/"}).json()
    assert body["success"] is True and body["warning"] is None
    urls = {link["url"] for link in body["links"]}
    assert set(site.page_urls()) <= urls
    assert all("?" not in u for u in urls)  # ignore_query_parameters defaults to true
    assert {link["source"] for link in body["links"]} <= {"sitemap", "html"}
    assert body["metadata"]["links_count"] == len(body["links"])
    found = post(api, "/v1/map", {"url": f"{site.url}/", "search": "page/1"}).json()["links"]
    assert found and all("page/1" in link["url"] for link in found)
    none = post(api, "/v1/map", {"url": f"{site.url}/", "search": "nothing-like-this"}).json()
    assert none["links"] == [] and none["warning"]
    assert post(api, "/v1/map", {"url": "http://example.com/"}).status_code == 422


def test_work_concurrency_limit_holds_under_20_parallel_clients(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    api.configure(concurrency_limit=3, latency=0.3, retry_after=2)
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda i: extract(api, site.page_url(i % 12)), range(20)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) >= 3 and statuses.count(429) >= 1
    limited = next(a for a in answers if a.status_code == 429)
    assert (
        limited.json()["code"] == "WORK_CONCURRENCY_LIMITED" and limited.json()["retryable"] is True
    )
    assert limited.headers["Retry-After"] == "2"
    assert api.counters()["peak_concurrency"] == 3
    usage = get(api, "/v1/usage/concurrency").json()
    assert usage == {"work_concurrency_in_use": 0, "work_concurrency_limit": 3}
    api.configure(retry_after=None)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: extract(api, site.page_url(i)), range(8)))
    assert all("Retry-After" not in a.headers for a in answers if a.status_code == 429)


def test_quota_counts_only_successful_extractions(api: GeonodeStandIn, site: SampleSite) -> None:
    api.configure(quota=2)
    api.inject("TIMEOUT")
    assert extract(api, site.page_url(2)).status_code == 422  # failed: not counted
    assert extract(api, site.page_url(2)).status_code == 200
    assert extract(api, site.page_url(2)).status_code == 200
    answer = extract(api, site.page_url(2))
    assert answer.status_code == 402
    assert answer.json()["code"] == "PAYMENT_REQUIRED" and answer.json()["retryable"] is False
    assert api.counters()["tokens_charged"] == 2


@pytest.mark.parametrize(
    ("kind", "code"), [("500", "INTERNAL_ERROR"), ("503", "SERVICE_UNAVAILABLE")]
)
def test_json_server_errors(api: GeonodeStandIn, site: SampleSite, kind: str, code: str) -> None:
    api.inject(kind)
    answer = extract(api, site.page_url(2))
    assert answer.status_code == int(kind)
    assert answer.json()["code"] == code and answer.json()["retryable"] is True
    assert extract(api, site.page_url(2)).status_code == 200  # only the next call


@pytest.mark.parametrize("kind", ["502", "504"])
def test_gateway_html_errors(api: GeonodeStandIn, site: SampleSite, kind: str) -> None:
    api.inject(kind)
    answer = extract(api, site.page_url(2))
    assert answer.status_code == int(kind)
    assert answer.headers["Content-Type"] == "text/html" and "<html>" in answer.text


def test_dropped_connection(api: GeonodeStandIn, site: SampleSite) -> None:
    api.inject("drop")
    with pytest.raises(requests.ConnectionError):
        extract(api, site.page_url(2))


def test_answer_slower_than_the_client_timeout(api: GeonodeStandIn, site: SampleSite) -> None:
    api.configure(slow_seconds=3)
    api.inject("slow")
    with pytest.raises(requests.Timeout):
        extract(api, site.page_url(2), wait=0.5)


def test_429_fault_with_and_without_retry_after(api: GeonodeStandIn, site: SampleSite) -> None:
    api.inject("429")
    assert "Retry-After" not in extract(api, site.page_url(2)).headers
    api.configure(retry_after=1.5)
    api.inject("429")
    answer = extract(api, site.page_url(2))
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "1.5"


@pytest.mark.parametrize("code", sorted(EXTRACTION_ERRORS))
def test_each_extraction_error_code(api: GeonodeStandIn, site: SampleSite, code: str) -> None:
    api.inject(code)
    answer = extract(api, site.page_url(2))
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"]["code"] == code and body["tokens_charged"] == 0
    assert body["error"]["retryable"] is EXTRACTION_ERRORS[code]


def test_random_faults_are_deterministic_under_a_seed(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    def sequence() -> list[int]:
        api.random_faults(0.5, kinds=("500", "503", "TIMEOUT"), seed=42)
        return [extract(api, site.page_url(2)).status_code for _ in range(30)]

    first, second = sequence(), sequence()
    assert first == second
    assert 200 in first and {500, 503, 422} & set(first)
    api.clear_faults()
    assert extract(api, site.page_url(2)).status_code == 200


def test_admin_endpoint_changes_knobs_and_reads_counters(
    api: GeonodeStandIn, site: SampleSite
) -> None:
    assert requests.post(f"{api.url}/_admin/knobs", json={"api_keys": ["other"]}, timeout=5).ok
    assert extract(api, site.page_url(2)).status_code == 401
    assert extract(api, site.page_url(2), headers={"If-Modified-Since": "x"}).status_code == 401
    requests.post(f"{api.url}/_admin/knobs", json={"api_keys": ["test-key"]}, timeout=5)
    requests.post(f"{api.url}/_admin/faults", json={"kind": "503", "count": 1}, timeout=5)
    assert extract(api, site.page_url(2)).status_code == 503
    bad = requests.post(f"{api.url}/_admin/faults", json={"kind": "nope"}, timeout=5)
    assert bad.status_code == 400 and "unknown fault" in bad.json()["error"]
    counters = requests.get(f"{api.url}/_admin/counters", timeout=5).json()
    assert counters["requests"]["POST /v1/extract"] == 3
    assert counters["statuses"] == {"401": 2, "503": 1}
    assert counters["faults"] == {"503": 1}
    assert counters["bodies"][-1]["body"]["url"] == site.page_url(2)
    knobs = requests.get(f"{api.url}/_admin/knobs", timeout=5).json()
    assert knobs["api_keys"] == ["test-key"]


def test_command_line_form_starts_and_answers() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "increcrawl_scrapy.testing.geonode", "--port", "0", "--key", "cli"],
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            assert requests.get(f"{url}/health", timeout=5).json()["status"] == "ok"
            answer = requests.get(
                f"{url}/v1/usage/concurrency", headers={"X-Api-Key": "cli"}, timeout=5
            )
            assert answer.status_code == 200
        finally:
            process.terminate()
