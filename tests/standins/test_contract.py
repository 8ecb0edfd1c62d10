"""Every kind of body the stand-in returns parses with the official SDK's models."""

from __future__ import annotations

import time

import pytest
import requests

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite

sdk = pytest.importorskip("geonode_scraper_sdk.models")

KEY = {"X-Api-Key": "test-key"}


def call(
    method: str, api: GeonodeStandIn, path: str, body: object = None, **kw
) -> requests.Response:
    return requests.request(method, f"{api.url}{path}", json=body, headers=KEY, timeout=10, **kw)


def until(api: GeonodeStandIn, path: str, status: str) -> dict:
    for _ in range(200):
        body = call("GET", api, path, params={"page_size": 50}).json()
        if body["status"] == status:
            return body
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {status}")


def test_extract_bodies(api: GeonodeStandIn, site: SampleSite) -> None:
    ok = call(
        "POST", api, "/v1/extract", {"url": site.page_url(2), "formats": ["markdown", "html"]}
    )
    sdk.ExtractSyncResponse.from_dict(ok.json())
    not_modified = call(
        "POST",
        api,
        "/v1/extract",
        {
            "url": site.page_url(0),
            "formats": ["markdown"],
            "headers": {"If-None-Match": site.etag(0)},
        },
    ).json()
    assert sdk.ExtractSyncResponse.from_dict(not_modified).metadata.http_status == 304
    accepted = call(
        "POST", api, "/v1/extract", {"url": site.page_url(2), "processing_mode": "async"}
    )
    parsed = sdk.ExtractAsyncResponse.from_dict(accepted.json())
    first = call("GET", api, parsed.status_url).json()
    sdk.JobStatusResponse.from_dict(first)
    done = until(api, parsed.status_url, "completed")
    assert sdk.JobStatusResponse.from_dict(done).data.html


def test_batch_bodies(api: GeonodeStandIn, site: SampleSite) -> None:
    api.inject("CAPTCHA_CHALLENGE", endpoint="batch_item")
    accepted = call("POST", api, "/v1/batch", {"urls": [*site.page_urls(), "nope"]}).json()
    sdk.BatchAccepted.from_dict(accepted)
    path = accepted["status_url"]
    sdk.BatchStatusResponse.from_dict(call("GET", api, path).json())
    done = until(api, path, "completed")
    parsed = sdk.BatchStatusResponse.from_dict(done)
    assert parsed.failed_urls == 1 and len(parsed.results) == len(site.page_urls())
    api.configure(batch_stall=True)
    job = call("POST", api, "/v1/batch", {"urls": site.page_urls()}).json()
    sdk.BatchCancelled.from_dict(call("DELETE", api, job["status_url"]).json())
    sdk.BatchStatusResponse.from_dict(call("GET", api, job["status_url"]).json())


def test_map_usage_and_health_bodies(api: GeonodeStandIn, site: SampleSite) -> None:
    sdk.MapResponse.from_dict(call("POST", api, "/v1/map", {"url": site.url}).json())
    empty = call("POST", api, "/v1/map", {"url": site.url, "search": "zzz"}).json()
    assert sdk.MapResponse.from_dict(empty).warning
    sdk.ConcurrencyUsageResponse.from_dict(call("GET", api, "/v1/usage/concurrency").json())
    sdk.HealthResponse.from_dict(requests.get(f"{api.url}/health", timeout=5).json())


@pytest.mark.parametrize("fault", ["429", "500", "503"])
def test_first_error_shape(api: GeonodeStandIn, site: SampleSite, fault: str) -> None:
    api.inject(fault)
    body = call("POST", api, "/v1/extract", {"url": site.page_url(2)}).json()
    sdk.ErrorResponse.from_dict(body)


def test_auth_quota_and_concurrency_errors(api: GeonodeStandIn, site: SampleSite) -> None:
    bad = requests.post(f"{api.url}/v1/extract", json={"url": site.url}, timeout=5)
    assert bad.status_code == 401
    assert sdk.ErrorResponse.from_dict(bad.json()).retryable is False
    api.configure(quota=0)
    quota = call("POST", api, "/v1/extract", {"url": site.url})
    assert quota.status_code == 402
    assert sdk.ErrorResponse.from_dict(quota.json()).retryable is False
    api.configure(quota=None, concurrency_limit=0)
    busy = call("POST", api, "/v1/extract", {"url": site.url})
    assert busy.status_code == 429
    parsed = sdk.ErrorResponse.from_dict(busy.json())
    assert parsed.code == "WORK_CONCURRENCY_LIMITED" and parsed.retryable is True
    assert sdk.ErrorResponse.from_dict(bad.json()).code != parsed.code


def test_extraction_errors_and_validation(api: GeonodeStandIn, site: SampleSite) -> None:
    api.inject("PROXY_ERROR")
    sdk.ExtractionErrorResponse.from_dict(
        call("POST", api, "/v1/extract", {"url": site.url}).json()
    )
    api.configure(origin_status_mode="error")
    site.delete(3, status=410)
    gone = call("POST", api, "/v1/extract", {"url": site.page_url(3)}).json()
    assert sdk.ExtractionErrorResponse.from_dict(gone).error.code == "UNPROCESSABLE_CONTENT"
    invalid = call("POST", api, "/v1/extract", {"formats": ["pdf"], "timeout": 1}).json()
    assert len(sdk.HTTPValidationError.from_dict(invalid).detail) == 3
