"""What SDKs ask besides events: feature flags (posthog-python's own call), the browser SDKs'
bootstrap requests, CORS from any origin, and the user-agent enrichment."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import requests
from posthog import Posthog
from segment.analytics import Client

from spurtest import FaultProxy, Spur, post

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)

IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.0 Mobile/15E148 Safari/604.1")
WINDOWS_CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                  "Chrome/126.0.0.0 Safari/537.36")


def test_posthog_python_flags(spur: Spur, app: str) -> None:
    """posthog-python's flag calls get "no flags": None / False / {}, and no error."""
    errors: list = []
    rec = FaultProxy(spur.url, fail=False)
    ph = Posthog(app, host=rec.url + "/ingest/posthog", on_error=lambda e, b: errors.append(e),
                 feature_flags_request_timeout_seconds=5)
    flags = ph.evaluate_flags("u-1")
    assert (flags.get_flag("beta"), flags.is_enabled("beta"), flags.keys) == (None, False, [])
    ph.shutdown()
    rec.close()
    assert errors == []
    seen = [(s.path.split("?")[0], s.status) for s in rec.seen]
    # The flags request, then a batch with the client's own $feature_flag_called event.
    assert seen[0] == ("/ingest/posthog/flags/", 200) and all(st == 200 for _, st in seen), seen


def test_browser_bootstrap(spur: Spur, app: str) -> None:
    """posthog-js's /flags/ and remote config, analytics-next's settings (pointing back at Spur)."""
    r = requests.post(spur.url + "/ingest/posthog/flags/?v=2&config=true", json={"token": app, "distinct_id": "u"},
                      timeout=30)
    got = r.json()
    assert r.status_code == 200 and got["featureFlags"] == {} and got["sessionRecording"] is False, r.text
    assert set(got["supportedCompression"]) == {"gzip", "gzip-js"} and got["surveys"] is False, r.text
    r = requests.post(spur.url + "/ingest/posthog/decide/?v=3", json={"token": app, "distinct_id": "u"}, timeout=30)
    assert r.status_code == 200 and r.json()["featureFlags"] == {}, r.text
    r = requests.get(f"{spur.url}/ingest/posthog/array/{app}/config", timeout=30)
    assert r.status_code == 200 and isinstance(r.json(), dict), r.text
    r = requests.get(f"{spur.url}/ingest/segment/v1/projects/{app}/settings", timeout=30)
    seg = r.json()["integrations"]["Segment.io"]
    host = spur.url.split("://", 1)[1]
    assert r.status_code == 200 and seg["apiHost"] == host + "/ingest/segment/v1" and seg["protocol"] == "http", r.text
    assert app not in spur.apps()  # asking stores nothing


@pytest.mark.parametrize("path", ["/ingest/posthog/e/", "/ingest/segment/v1/t", "/ingest/amplitude/2/httpapi",
                                  "/ingest/mixpanel/track"])
def test_cors_any_origin(spur: Spur, app: str, path: str) -> None:
    """A preflight from any origin is answered, and a cross-site POST is not refused."""
    r = requests.options(spur.url + path, headers={"Origin": "https://shop.example",
                                                   "Access-Control-Request-Method": "POST",
                                                   "Access-Control-Request-Headers": "content-type"}, timeout=30)
    assert r.status_code in (200, 204) and r.headers.get("Access-Control-Allow-Origin") == "*", (r.status_code,
                                                                                                 r.headers)
    status, headers, out = post(spur.url + path, b"{", {"Origin": "https://shop.example",
                                                        "Sec-Fetch-Site": "cross-site"})
    assert status != 403 and headers.get("Access-Control-Allow-Origin") == "*", (status, out)


def test_user_agent_enrichment(spur: Spur, app: str) -> None:
    """Segment's context.userAgent and PostHog's $raw_user_agent give $browser, $os and
    $device_type where the client sent none; a client's own $browser or $os is kept."""
    seg = Client(write_key=app, host=spur.url + "/ingest/segment")
    seg.track(user_id="ua-1", event="seen", context={"userAgent": IPHONE}, timestamp=T0, message_id="ua-seg")
    seg.flush()
    seg.shutdown()
    ph = Posthog(app, host=spur.url + "/ingest/posthog", disable_geoip=True)
    ph.capture("seen", distinct_id="ua-1", properties={"$raw_user_agent": WINDOWS_CHROME}, timestamp=T0,
               uuid="00000000-0000-4000-8000-0000000000a1")
    ph.capture("seen", distinct_id="ua-1", properties={"$raw_user_agent": WINDOWS_CHROME, "$browser": "Mine"},
               timestamp=T0, uuid="00000000-0000-4000-8000-0000000000a2")
    ph.flush()
    ph.shutdown()
    iphone = spur.event(app, "ua-1", "ua-seg")["properties"]
    assert "Safari" in iphone.get("$browser", "") and "iOS" in iphone.get("$os", ""), iphone
    assert iphone.get("$device_type") == "Mobile", iphone
    chrome = spur.event(app, "ua-1", "00000000-0000-4000-8000-0000000000a1")["properties"]
    # posthog-python sends its own $os (the machine's, "Linux"): kept, not derived.
    assert (chrome.get("$browser"), chrome.get("$os"), chrome.get("$device_type")) == ("Chrome", "Linux", "Desktop")
    assert spur.event(app, "ua-1", "00000000-0000-4000-8000-0000000000a2")["properties"]["$browser"] == "Mine"


def test_user_agent_header_on_browser_paths(spur: Spur, app: str) -> None:
    """The request's User-Agent is the browser's on posthog-js's /e/ (enriched), and the server
    SDK's own on /batch/ (not used)."""
    def ev(ins: str) -> dict:
        return {"event": "seen", "distinct_id": "ua-2", "uuid": ins, "timestamp": "2024-05-01T12:00:00Z",
                "properties": {"token": app}}
    for path, ins in (("/ingest/posthog/e/", "00000000-0000-4000-8000-0000000000b1"),
                      ("/ingest/posthog/batch/", "00000000-0000-4000-8000-0000000000b2")):
        status, _, out = post(spur.url + path, json.dumps([ev(ins)]).encode(),
                              {"Content-Type": "text/plain", "User-Agent": IPHONE})
        assert (status, json.loads(out)) == (200, {"status": 1}), (path, status, out)
    browser = spur.event(app, "ua-2", "00000000-0000-4000-8000-0000000000b1")["properties"]
    assert browser.get("$device_type") == "Mobile" and "iOS" in browser.get("$os", ""), browser
    server = spur.event(app, "ua-2", "00000000-0000-4000-8000-0000000000b2")["properties"]
    assert not {"$browser", "$os", "$device_type"} & set(server), server
