"""Every capture endpoint fed good, truncated, oversize, wrong-key, mixed-key, mistyped and
undecodable bodies: each gets its protocol's answer and stores nothing it should not.

Plain HTTP posts (requests), no SDK: the bodies are the ones the clients send, as captured from
them in the project's protocol notes.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from spurtest import Spur, post

T0_MS = 1714564800000  # 2024-05-01T12:00:00Z

# An event as the tests think of it: (name, distinct id, dedup id, seconds after T0, properties).
Event = Tuple[str, str, str, int, dict]


def iso(s: int) -> str:
    return "2024-05-01T12:%02d:%02d.000Z" % divmod(s, 60)


def basic(user: str) -> str:
    return "Basic " + base64.b64encode((user + ":").encode()).decode()


@dataclass
class Endpoint:
    """One capture path and how its clients put events and the key into a body."""

    name: str
    path: str
    render: Callable[[str, List[Event]], Tuple[bytes, Dict[str, str]]]
    ok: Callable[[int, bytes, int], None]        # (status, body, events sent) of a good request
    bad: Callable[[int, bytes, str], None]       # (status, body, kind) of a request to refuse
    single: bool = False                         # takes one event per request


# --- the protocols' bodies ----------------------------------------------------------------------


def ph_event(e: Event, token: Optional[str] = None) -> dict:
    name, d, ins, s, props = e
    props = dict(props)
    if token is not None:
        props["token"] = token
    out = {"event": name, "distinct_id": d, "uuid": ins, "timestamp": iso(s), "properties": props}
    return {k: v for k, v in out.items() if v is not None}


def ph_batch(key: str, events: List[Event]):
    return json.dumps({"api_key": key, "batch": [ph_event(e) for e in events]}).encode(), \
        {"Content-Type": "application/json"}


def ph_array(key: str, events: List[Event]):
    # posthog-js: a JSON array, the key in each event's properties.token, sent as text/plain.
    return json.dumps([ph_event(e, key) for e in events]).encode(), {"Content-Type": "text/plain"}


def ph_one(key: str, events: List[Event]):
    (e,) = events
    body = ph_event(e)
    body["api_key"] = key
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


def seg_msg(e: Event) -> dict:
    name, d, ins, s, props = e
    out = {"type": "track", "event": name, "userId": d, "messageId": ins, "timestamp": iso(s), "properties": props}
    return {k: v for k, v in out.items() if v is not None}


def seg_batch(key: str, events: List[Event]):
    return json.dumps({"batch": [seg_msg(e) for e in events], "sentAt": iso(0)}).encode(), \
        {"Content-Type": "application/json", "Authorization": basic(key)}


def seg_one(key: str, events: List[Event]):
    (e,) = events
    body = seg_msg(e)
    body["writeKey"] = key  # analytics.js: the key in the body, text/plain
    return json.dumps(body).encode(), {"Content-Type": "text/plain"}


def amp_body(key: str, events: List[Event]):
    return json.dumps({"api_key": key, "events": [
        {k: v for k, v in {"event_type": n, "user_id": d, "insert_id": ins, "time": T0_MS + 1000 * s,
                           "event_properties": p}.items() if v is not None}
        for n, d, ins, s, p in events], "options": {"min_id_length": 1}}).encode(), \
        {"Content-Type": "application/json; charset=UTF-8"}


def mp_events(key: str, events: List[Event]) -> list:
    return [{"event": n, "properties": {k: v for k, v in {
        "token": key, "distinct_id": d, "time": T0_MS // 1000 + s, "$insert_id": ins, **p}.items() if v is not None}}
        for n, d, ins, s, p in events]


def mp_track(key: str, events: List[Event]):
    form = urllib.parse.urlencode({"data": json.dumps(mp_events(key, events)), "verbose": 1, "ip": 0})
    return form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}


def mp_import(key: str, events: List[Event]):
    return json.dumps(mp_events(key, events)).encode(), \
        {"Content-Type": "application/json", "Authorization": basic(key)}


# --- the protocols' answers ---------------------------------------------------------------------


def jsonof(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return None


def ph_ok(status: int, body: bytes, n: int) -> None:
    assert (status, jsonof(body)) == (200, {"status": 1}), body


def seg_ok(status: int, body: bytes, n: int) -> None:
    assert status == 200, body


def amp_ok(status: int, body: bytes, n: int) -> None:
    got = jsonof(body)
    assert status == 200 and got["code"] == 200 and got["events_ingested"] == n, body
    assert got["payload_size_bytes"] > 0 and got["server_upload_time"] > 0, body


def mp_track_ok(status: int, body: bytes, n: int) -> None:
    assert (status, jsonof(body)) == (200, {"status": 1, "error": None}), body


def mp_import_ok(status: int, body: bytes, n: int) -> None:
    got = jsonof(body)
    assert status == 200 and got["code"] == 200 and got["num_records_imported"] == n, body


# Statuses of refused requests: the SDK capture contract's, for each kind.
BAD_STATUS = {"truncated": 400, "undecodable": 400, "gzip": 400, "key": 401, "oversize": 413}


def ph_bad(status: int, body: bytes, kind: str) -> None:
    assert status == BAD_STATUS[kind], (kind, status, body)


def seg_bad(status: int, body: bytes, kind: str) -> None:
    # Segment answers 400 to an oversize batch (its docs); 413 is Spur's generic answer. Both are
    # terminal for segment-python; neither stores anything.
    want = (400, 413) if kind == "oversize" else (BAD_STATUS[kind],)
    assert status in want, (kind, status, body)


def amp_bad(status: int, body: bytes, kind: str) -> None:
    want = {"key": 400}.get(kind, BAD_STATUS[kind])  # Amplitude: an unknown key is a 400
    got = jsonof(body)
    assert status == want and isinstance(got, dict) and got.get("code") == want, (kind, status, body)
    if kind == "key":
        assert got["error"].startswith("Invalid API key:"), body  # the Python SDK raises on this prefix


def mp_bad(status: int, body: bytes, kind: str) -> None:
    assert status == BAD_STATUS[kind], (kind, status, body)
    got = jsonof(body)
    if isinstance(got, dict) and "status" in got:
        assert got["status"] != 1, body


ENDPOINTS = [
    Endpoint("posthog-batch", "/ingest/posthog/batch/", ph_batch, ph_ok, ph_bad),
    Endpoint("posthog-batch-noslash", "/ingest/posthog/batch", ph_batch, ph_ok, ph_bad),
    Endpoint("posthog-e", "/ingest/posthog/e/", ph_array, ph_ok, ph_bad),
    Endpoint("posthog-i-v0-e", "/ingest/posthog/i/v0/e/", ph_array, ph_ok, ph_bad),
    Endpoint("posthog-capture", "/ingest/posthog/capture/", ph_one, ph_ok, ph_bad, single=True),
    Endpoint("posthog-track", "/ingest/posthog/track/", ph_batch, ph_ok, ph_bad),
    Endpoint("segment-batch", "/ingest/segment/v1/batch", seg_batch, seg_ok, seg_bad),
    Endpoint("segment-track", "/ingest/segment/v1/track", seg_one, seg_ok, seg_bad, single=True),
    Endpoint("segment-t", "/ingest/segment/v1/t", seg_one, seg_ok, seg_bad, single=True),
    Endpoint("amplitude-httpapi", "/ingest/amplitude/2/httpapi", amp_body, amp_ok, amp_bad),
    Endpoint("amplitude-batch", "/ingest/amplitude/batch", amp_body, amp_ok, amp_bad),
    Endpoint("mixpanel-track", "/ingest/mixpanel/track", mp_track, mp_track_ok, mp_bad),
    Endpoint("mixpanel-import", "/ingest/mixpanel/import", mp_import, mp_import_ok, mp_bad),
]


def send(spur_url: str, ep: Endpoint, key: str, events: List[Event]) -> Tuple[int, bytes]:
    body, headers = ep.render(key, events)
    status, _, out = post(spur_url + ep.path, body, headers)
    return status, out


def good(ep: Endpoint, tag: str) -> List[Event]:
    if ep.single:
        return [("good", "u-" + tag, f"{tag}-1", 1, {"k": "v"})]
    return [("good", "u-" + tag, f"{tag}-1", 1, {"k": "v"}), ("good", "u2-" + tag, f"{tag}-2", 2, {"k": "w"})]


def gzip_body(ep: Endpoint, key: str, events: List[Event]) -> Tuple[bytes, Dict[str, str]]:
    body, headers = ep.render(key, events)
    return gzip.compress(body), {**headers, "Content-Encoding": "gzip"}


@pytest.mark.parametrize("ep", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_endpoint_good_bodies(spur: Spur, app: str, ep: Endpoint) -> None:
    """Plain JSON, gzip with Content-Encoding, and gzip recognised by its magic bytes alone
    (posthog-js sends it so): each stored, a resend of the first one stored once."""
    status, out = send(spur.url, ep, app, good(ep, "a"))
    ep.ok(status, out, len(good(ep, "a")))
    body, headers = gzip_body(ep, app, good(ep, "g"))
    status, _, out = post(spur.url + ep.path, body, headers)
    ep.ok(status, out, len(good(ep, "g")))
    body, headers = ep.render(app, good(ep, "m"))
    status, _, out = post(spur.url + ep.path, gzip.compress(body), headers)
    ep.ok(status, out, len(good(ep, "m")))
    status, out = send(spur.url, ep, app, good(ep, "a"))
    ep.ok(status, out, len(good(ep, "a")))
    spur.assert_counts(app, {"good": 3 * len(good(ep, "a"))})


def refused_body(ep: Endpoint, app: str, kind: str) -> Tuple[bytes, Dict[str, str]]:
    """The request of one refused kind, carrying one event "bad"."""
    bad_events: List[Event] = [("bad", "u-bad", "bad-1", 3, {"k": "x"})]
    body, headers = ep.render(app, bad_events)
    if kind == "truncated":
        return body[: len(body) // 2], headers
    if kind == "undecodable":
        return os.urandom(64) + b"\xff\x00", headers
    if kind == "gzip":  # a truncated gzip stream, with Content-Encoding
        return gzip.compress(body)[:20], {**headers, "Content-Encoding": "gzip"}
    if kind == "oversize":  # over every limit: the events endpoint's 20 MiB as sent, each protocol's own
        return ep.render(app, [("bad", "u-big", "bad-big", 4, {"blob": "x" * (21 << 20)})])
    if kind == "key-not-an-app":  # under --auth none the key is read as the app's name
        return ep.render("Not An App!", bad_events)
    assert kind == "key-none"
    return ep.render("", bad_events)


REFUSED = ["truncated", "undecodable", "gzip", "oversize", "key-not-an-app", "key-none"]


@pytest.mark.parametrize("ep,kind", [pytest.param(ep, kind, id=f"{ep.name}-{kind}") for ep in ENDPOINTS for kind in REFUSED])
def test_endpoint_refused_body(spur: Spur, app: str, ep: Endpoint, kind: str) -> None:
    """Truncated, undecodable, truncated-gzip, oversize and keyless bodies get the protocol's
    answer, and nothing is stored."""
    body, headers = refused_body(ep, app, kind)
    status, _, out = post(spur.url + ep.path, body, headers)
    ep.bad(status, out, kind.split("-")[0])
    assert app not in spur.apps()


@pytest.mark.parametrize("ep", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_endpoint_mistyped_property(spur: Spur, app: str, ep: Endpoint) -> None:
    """A property that is a number in one request and a string in a later one: the later event is
    stored without it (and with its other properties)."""
    first = [("typed", "u-t", "t-1", 1, {"v": 1, "w": "a"})]
    status, out = send(spur.url, ep, app, first)
    ep.ok(status, out, 1)
    later = [("typed", "u-t", "t-2", 2, {"v": "not a number", "w": "b"})]
    status, out = send(spur.url, ep, app, later)
    ep.ok(status, out, 1)
    want = {"t-1": {"v": 1, "w": "a"}, "t-2": {"w": "b"}}
    dropped = ["properties.v"]
    if not ep.single:  # both in one request: a number, then a string
        both = [("typed", "u-t", "t-3", 3, {"x": 2.5}), ("typed", "u-t", "t-4", 4, {"x": "two", "w": "c"})]
        status, out = send(spur.url, ep, app, both)
        ep.ok(status, out, 2)
        want.update({"t-3": {"x": 2.5}, "t-4": {"w": "c"}})
        dropped.append("properties.x")
    spur.assert_counts(app, {"typed": len(want)})
    props = {e["insert_id"]: {k: v for k, v in e["properties"].items() if k in "vwx"}
             for e in spur.trail(app, "u-t")}
    assert props == want
    r = spur.http.get(f"{spur.url}/api/apps/{app}/warnings", params={"kind": "property"}, timeout=30)
    assert r.status_code == 200 and sorted(w["field"] for w in r.json()["warnings"]) == dropped, r.text


BATCHES = [e for e in ENDPOINTS if not e.single]


@pytest.mark.parametrize("ep", BATCHES, ids=[e.name for e in BATCHES])
def test_endpoint_partly_bad(spur: Spur, app: str, ep: Endpoint) -> None:
    """A batch whose middle event has no distinct id: the good events are stored, and the answer
    is one the client acts on without resending the batch forever. Amplitude and Mixpanel's
    /import may instead list the bad event by index (400): the test then resends the rest, as
    amplitude-analytics does, and the good events are still stored once."""
    events = [("ok", "u-1", "p-1", 1, {}), ("ok", None, "p-2", 2, {}), ("ok", "u-3", "p-3", 3, {})]
    status, out = send(spur.url, ep, app, events)
    got = jsonof(out)
    if ep.name.startswith("amplitude") and status == 400:
        listed = {**got.get("events_with_missing_fields", {}), **got.get("events_with_invalid_fields", {}),
                  **got.get("events_with_invalid_id_lengths", {})}
        assert got["code"] == 400 and sorted({i for v in listed.values() for i in v}) == [1], out
        status, out = send(spur.url, ep, app, [events[0], events[2]])
        ep.ok(status, out, 2)
    elif ep.name == "mixpanel-import" and status == 400:
        assert got["code"] == 400 and got["num_records_imported"] == 2, out
        assert [r["index"] for r in got["failed_records"]] == [1], out
    elif ep.name == "mixpanel-track" and status == 400:
        assert got["status"] == 0, out  # mixpanel-python raises: nothing is resent
    else:
        ep.ok(status, out, 2)
    spur.assert_counts(app, {"ok": 2})


def test_posthog_mixed_keys(spur: Spur, app: str) -> None:
    """Two events of one posthog-js batch with different tokens: 401, nothing stored in either app."""
    other = app[:50] + "-other"
    body = json.dumps([ph_event(("mixed", "u-1", "x-1", 1, {}), app),
                       ph_event(("mixed", "u-2", "x-2", 2, {}), other)]).encode()
    for path in ("/ingest/posthog/e/", "/ingest/posthog/batch/"):
        status, _, out = post(spur.url + path, body, {"Content-Type": "application/json"})
        assert status == 401, (path, status, out)
    apps = spur.apps()
    assert app not in apps and other not in apps, apps


# --- keys: a server with real keys --------------------------------------------------------------


@pytest.mark.parametrize("ep", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_endpoint_keys(keyed, ep: Endpoint) -> None:
    """With --auth keys: an ingest key of app "keyed" stores there; an unknown key and a query key are
    refused in the protocol's shape and store nothing."""
    s: Spur = keyed.spur
    name = ep.name.replace("-", "_")
    status, out = send(s.url, ep, keyed.ingest_key, [(name + "_ok", "u-k", name + "-1", 1, {})])
    ep.ok(status, out, 1)
    for key in ("spur_" + "a" * 32, keyed.query_key, "keyed"):
        status, out = send(s.url, ep, key, [(name + "_bad", "u-k", name + "-2", 2, {})])
        ep.bad(status, out, "key")
    got = s.counts("keyed", [name + "_ok", name + "_bad"])
    assert (got[name + "_ok"], got[name + "_bad"]) == (1, 0), got
    # An ingest key of another app writes to that app.
    status, out = send(s.url, ep, keyed.other_key, [(name + "_other", "u-k", name + "-3", 3, {})])
    ep.ok(status, out, 1)
    assert s.counts("other", [name + "_other"])[name + "_other"] == 1
    assert s.counts("keyed", [name + "_other"])[name + "_other"] == 0
