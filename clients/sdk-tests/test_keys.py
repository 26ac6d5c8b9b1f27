"""The real clients against a server with keys (`spur serve --auth keys`): an ingest key stores in
its app; an unknown key makes each client give up after one request, as against its vendor
(the Python SDKs treat a 4xx as terminal), and stores nothing."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from amplitude import Amplitude, BaseEvent, Config
from mixpanel import Consumer, Mixpanel, MixpanelException
from posthog import Posthog
from segment.analytics import Client

from spurtest import FaultProxy, Spur, wait_until

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
T0_MS = 1714564800000


def send_posthog(url: str, key: str, name: str, errors: list) -> None:
    ph = Posthog(key, host=url + "/ingest/posthog", on_error=lambda e, b: errors.append(e), disable_geoip=True)
    ph.capture(name, distinct_id="k-1", timestamp=T0, uuid="00000000-0000-4000-8000-00000000c001")
    ph.flush()
    ph.shutdown()


def send_segment(url: str, key: str, name: str, errors: list) -> None:
    seg = Client(write_key=key, host=url + "/ingest/segment", on_error=lambda e, b: errors.append(e))
    seg.track(user_id="k-1", event=name, timestamp=T0, message_id="k-seg-1")
    seg.flush()
    seg.shutdown()


def send_amplitude(url: str, key: str, name: str, errors: list) -> None:
    codes: list = []
    amp = Amplitude(key, Config(server_url=url + "/ingest/amplitude/2/httpapi",
                                callback=lambda e, code, msg=None: codes.append(code)))
    amp.track(BaseEvent(name, user_id="k-user-1", time=T0_MS, insert_id="k-amp-1"))
    try:
        for f in amp.flush():
            f.result()
    except Exception as e:  # InvalidAPIKeyError comes out of the flush's future
        errors.append(e)
    amp.shutdown()
    if codes != [200]:
        errors.append(codes)


def send_mixpanel(url: str, key: str, name: str, errors: list) -> None:
    m = url + "/ingest/mixpanel"
    mp = Mixpanel(key, consumer=Consumer(events_url=m + "/track", people_url=m + "/engage"))
    try:
        mp.track("k-1", name, {"time": T0_MS // 1000, "$insert_id": "k-mp-1"})
    except MixpanelException as e:
        errors.append(e)


CLIENTS = {"posthog": send_posthog, "segment": send_segment, "amplitude": send_amplitude, "mixpanel": send_mixpanel}


@pytest.mark.parametrize("sdk", list(CLIENTS))
def test_client_keys(keyed, sdk: str) -> None:
    s: Spur = keyed.spur
    rec = FaultProxy(s.url, fail=False)
    try:
        errors: list = []
        CLIENTS[sdk](rec.url, keyed.ingest_key, f"{sdk}_client_ok", errors)
        assert errors == []
        wait_until(lambda: s.counts("keyed", [f"{sdk}_client_ok"])[f"{sdk}_client_ok"] == 1, 10, "the event")
        before = len(rec.seen)
        CLIENTS[sdk](rec.url, "spur_" + "b" * 32, f"{sdk}_client_bad", errors)
        assert errors, "the client reported no error for an unknown key"
        assert [st for st in rec.statuses()[before:]] == [400 if sdk == "amplitude" else 401]
        assert s.counts("keyed", [f"{sdk}_client_bad"])[f"{sdk}_client_bad"] == 0
    finally:
        rec.close()


def test_amplitude_python_partial(spur: Spur, app: str) -> None:
    """An event whose user id is shorter than the default min_id_length (5): the server lists it by
    index (400), amplitude-analytics drops it and resends the others, stored once each."""
    codes: dict = {}
    rec = FaultProxy(spur.url, fail=False)
    amp = Amplitude(app, Config(server_url=rec.url + "/ingest/amplitude/2/httpapi", flush_interval_millis=200,
                                callback=lambda e, code, msg=None: codes.__setitem__(e.insert_id, code)))
    for i, uid in enumerate(["amp-long-1", "ab", "amp-long-2"]):
        amp.track(BaseEvent("part", user_id=uid, time=T0_MS + i, insert_id=f"part-{i}"))
    for f in amp.flush():
        f.result()
    wait_until(lambda: len(codes) == 3, 20, f"three callbacks: {codes}")
    amp.shutdown()
    rec.close()
    assert codes == {"part-0": 200, "part-1": 400, "part-2": 200}
    assert rec.statuses() == [400, 200]
    spur.assert_counts(app, {"part": 2})
