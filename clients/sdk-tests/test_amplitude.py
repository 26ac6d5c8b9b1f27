"""amplitude-analytics 1.3.0 against `spur serve`: events with a device id only, then with user and
device id (one person), user_properties $set/$setOnce, an identify, and a 503 retry stored once."""

from __future__ import annotations

import threading

import pytest
from amplitude import Amplitude, BaseEvent, Config, EventOptions, Identify

from spurtest import FaultProxy, Spur, subset, wait_until

T0_MS = 1714564800000  # 2024-05-01T12:00:00Z


class Acks:
    """The client's callback: the last code per insert_id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.codes: dict = {}

    def __call__(self, event: BaseEvent, code: int, message=None) -> None:
        with self.lock:
            self.codes[event.insert_id] = (code, message)

    def wait_ok(self, ids) -> None:
        wait_until(lambda: all(self.codes.get(i, (0,))[0] == 200 for i in ids), 30,
                   f"code 200 for {ids}: {self.codes}")


def client(app: str, url: str, acks: Acks, batch: bool = False) -> Amplitude:
    path = "/ingest/amplitude/batch" if batch else "/ingest/amplitude/2/httpapi"
    return Amplitude(app, Config(server_url=url + path, use_batch=batch, min_id_length=1, callback=acks,
                                 flush_interval_millis=200))


def flush(amp: Amplitude) -> None:
    for f in amp.flush():
        f.result()


@pytest.mark.parametrize("batch", [False, True], ids=["httpapi", "batch"])
def test_amplitude_python(spur: Spur, app: str, batch: bool) -> None:
    acks = Acks()
    amp = client(app, spur.url, acks, batch)
    dev, user = "amp-device-1", "amp-user-1"
    ids = []

    def track(name: str, i: int, **kw) -> None:
        ids.append(f"ins-{i}")
        amp.track(BaseEvent(name, time=T0_MS + 1000 * i, insert_id=f"ins-{i}", **kw))

    track("signup", 0, device_id=dev, event_properties={"plan": "free", "n": 1})
    track("page_view", 1, device_id=dev, event_properties={"path": "/home"},
          user_properties={"$set": {"email": "a@b.c"}, "$setOnce": {"first_seen": "web"}})
    track("purchase", 2, user_id=user, device_id=dev, event_properties={"amount": 9.5, "items": ["a", "b"]})
    ident = Identify()
    ident.set("name", "Ada")
    ident.set_once("signup_source", "ads")
    ident.set_once("first_seen", "not-first")
    amp.identify(ident, EventOptions(user_id=user, device_id=dev, time=T0_MS + 3000, insert_id="ins-3"))
    ids.append("ins-3")
    track("purchase", 4, user_id=user, event_properties={"amount": 5.25})
    track("signup", 0, device_id=dev, event_properties={"plan": "free", "n": 1})  # a duplicate: one event
    flush(amp)
    acks.wait_ok(ids)
    amp.shutdown()

    spur.assert_counts(app, {"signup": 1, "page_view": 1, "purchase": 2, "$identify": 1})
    person = spur.assert_one_person(app, [dev, user], person_id=user)
    assert subset(person["properties"], ["email", "first_seen", "name", "signup_source"]) == {
        "email": "a@b.c", "first_seen": "web", "name": "Ada", "signup_source": "ads"}
    signup = spur.event(app, dev, "ins-0")
    assert (signup["event"], signup["distinct_id"], signup["time"]) == ("signup", dev, "2024-05-01T12:00:00.000000Z")
    assert subset(signup["properties"], ["plan", "n"]) == {"plan": "free", "n": 1}
    purchase = spur.event(app, user, "ins-2")
    assert (purchase["distinct_id"], purchase["properties"]["items"]) == (user, '["a","b"]')
    assert spur.breakdown(app, "purchase", "amount") == {"9.5": 1, "5.25": 1}


def test_amplitude_python_retry(spur: Spur, app: str, proxy: FaultProxy) -> None:
    """A 503 on the first /2/httpapi: the client re-queues the events and resends them, stored once."""
    acks = Acks()
    amp = client(app, proxy.url, acks)
    ids = [f"r-{i}" for i in range(3)]
    for i, ins in enumerate(ids):
        amp.track(BaseEvent("retried", user_id=f"amp-r-{i}", time=T0_MS + i, insert_id=ins, event_properties={"i": i}))
    flush(amp)
    acks.wait_ok(ids)
    amp.shutdown()
    statuses = proxy.statuses("/ingest/amplitude/2/httpapi")
    assert statuses[0] == 503 and statuses[1:] and all(s == 200 for s in statuses[1:]), statuses
    assert proxy.seen[0].upstream == (200 if proxy.stored else 0)  # lost-answer: the first copy was stored
    spur.assert_counts(app, {"retried": 3})
