"""segment-analytics-python 2.4.0 against `spur serve`: track, identify with traits, alias, page,
screen, and a 503 retry stored once."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from segment.analytics import Client

from spurtest import FaultProxy, Spur, subset

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def client(app: str, host: str, errors: list, **kw) -> Client:
    return Client(write_key=app, host=host + "/ingest/segment", on_error=lambda e, batch: errors.append(e), **kw)


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_segment_python(spur: Spur, app: str, gzip: bool) -> None:
    errors: list = []
    seg = client(app, spur.url, errors, gzip=gzip)
    anon, user, prev = "seg-anon-1", "seg-user-1", "seg-prev-1"
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    seg.track(anonymous_id=anon, event="signup", properties={"plan": "free", "n": 1}, timestamp=at(0),
              message_id="m-1")
    seg.track(anonymous_id=anon, event="page_view", properties={"path": "/home"}, timestamp=at(1), message_id="m-2",
              context={"ip": "1.2.3.4"})
    seg.identify(user_id=user, anonymous_id=anon, traits={"email": "a@b.c", "name": "Ada"}, timestamp=at(2),
                 message_id="m-3")
    seg.track(user_id=user, event="purchase", properties={"amount": 9.5, "items": ["a", "b"]}, timestamp=at(3),
              message_id="m-4")
    seg.alias(previous_id=prev, user_id=user, timestamp=at(4), message_id="m-5")
    seg.page(user_id=user, category="Docs", name="Intro", properties={"url": "https://x/y"}, timestamp=at(5),
             message_id="m-6")
    seg.screen(user_id=user, category="Main", name="Home", properties={"k": 1}, timestamp=at(6), message_id="m-7")
    seg.track(user_id=prev, event="purchase", properties={"amount": 5.25}, timestamp=at(7), message_id="m-8")
    seg.track(anonymous_id=anon, event="signup", properties={"plan": "free", "n": 1}, timestamp=at(0),
              message_id="m-1")  # a duplicate: one event
    seg.flush()
    seg.shutdown()
    assert errors == []

    spur.assert_counts(app, {"signup": 1, "page_view": 1, "$identify": 1, "purchase": 2, "$create_alias": 1,
                             "$pageview": 1, "$screen": 1})
    person = spur.assert_one_person(app, [anon, user, prev], person_id=user)
    assert subset(person["properties"], ["email", "name"]) == {"email": "a@b.c", "name": "Ada"}

    signup = spur.event(app, anon, "m-1")
    assert (signup["event"], signup["distinct_id"], signup["time"]) == ("signup", anon, "2024-05-01T12:00:00.000000Z")
    assert subset(signup["properties"], ["plan", "n", "context.library.name"]) == {
        "plan": "free", "n": 1, "context.library.name": "analytics-python"}
    assert spur.event(app, anon, "m-2")["properties"]["context.ip"] == "1.2.3.4"
    page = spur.event(app, user, "m-6")
    assert (page["event"], subset(page["properties"], ["name", "category", "url"])) == (
        "$pageview", {"name": "Intro", "category": "Docs", "url": "https://x/y"})
    screen = spur.event(app, user, "m-7")
    assert (screen["event"], subset(screen["properties"], ["name", "category", "k"])) == (
        "$screen", {"name": "Home", "category": "Main", "k": 1})
    purchase = spur.event(app, user, "m-4")
    assert purchase["properties"]["items"] == '["a","b"]'
    assert spur.breakdown(app, "purchase", "amount") == {"9.5": 1, "5.25": 1}


def test_segment_python_retry(spur: Spur, app: str, proxy: FaultProxy) -> None:
    """503 + Retry-After: 1 on the first /v1/batch: the resent batch is stored once."""
    errors: list = []
    seg = client(app, proxy.url, errors, max_retries=3)
    for i in range(3):
        seg.track(user_id=f"seg-r-{i}", event="retried", properties={"i": i}, timestamp=T0 + timedelta(seconds=i),
                  message_id=f"r-{i}")
    seg.flush()
    seg.shutdown()
    assert errors == []
    assert proxy.statuses("/ingest/segment/v1/batch") == [503, 200]
    assert proxy.seen[0].upstream == (200 if proxy.stored else 0)  # lost-answer: the first copy was stored
    # The same messages resent (on a 503 with Retry-After the client pauses and resends without
    # X-Retry-Count, unlike its other retries).
    sent = [[m["messageId"] for m in json.loads(s.body)["batch"]] for s in proxy.seen]
    assert sent == [["r-0", "r-1", "r-2"]] * 2
    spur.assert_counts(app, {"retried": 3})
