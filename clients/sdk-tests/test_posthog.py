"""posthog (PyPI) 7.91.1 against `spur serve`: events, properties, $identify, alias, set/set_once,
a 503 retry stored once, and a 10,000-event flush visible to the next query."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from posthog import Posthog

from spurtest import FaultProxy, Spur, subset

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def uid(app: str, i: int) -> str:
    """A deterministic valid UUID per (app, i), as posthog-python accepts only UUIDs."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"spur-sdk-tests/{app}/{i}"))


def client(app: str, host: str, errors: list, **kw) -> Posthog:
    return Posthog(app, host=host + "/ingest/posthog", on_error=lambda e, batch: errors.append(e),
                   disable_geoip=True, **kw)


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_posthog_python(spur: Spur, app: str, gzip: bool) -> None:
    errors: list = []
    ph = client(app, spur.url, errors, gzip=gzip)
    anon, user, anon2 = "ph-anon-1", "ph-user-1", "ph-anon-2"
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    ph.capture("signup", distinct_id=anon, properties={"plan": "free", "n": 1}, timestamp=at(0), uuid=uid(app, 1))
    ph.capture("page_view", distinct_id=anon, timestamp=at(1), uuid=uid(app, 2),
               properties={"path": "/home", "$set": {"email": "a@b.c"}, "$set_once": {"first_seen": "web"}})
    ph.capture("$identify", distinct_id=user, timestamp=at(2), uuid=uid(app, 3),
               properties={"$anon_distinct_id": anon, "$set": {"name": "Ada"}})
    ph.capture("purchase", distinct_id=user, properties={"amount": 9.5, "items": ["a", "b"]}, timestamp=at(3),
               uuid=uid(app, 4))
    ph.set(distinct_id=user, properties={"plan": "pro"}, timestamp=at(4), uuid=uid(app, 5))
    ph.set_once(distinct_id=user, properties={"signup_source": "ads", "first_seen": "not-first"}, timestamp=at(5),
                uuid=uid(app, 6))
    ph.alias(previous_id=anon2, distinct_id=user, timestamp=at(6), uuid=uid(app, 7))
    ph.capture("purchase", distinct_id=anon2, properties={"amount": 5.25}, timestamp=at(7), uuid=uid(app, 8))
    # The same event twice (same uuid): one event.
    ph.capture("signup", distinct_id=anon, properties={"plan": "free", "n": 1}, timestamp=at(0), uuid=uid(app, 1))
    ph.flush()
    ph.shutdown()
    assert errors == []

    spur.assert_counts(app, {"signup": 1, "page_view": 1, "$identify": 1, "purchase": 2, "$set": 1,
                             "$set_once": 1, "$create_alias": 1})
    person = spur.assert_one_person(app, [anon, user, anon2], person_id=user)
    assert subset(person["properties"], ["email", "first_seen", "name", "plan", "signup_source"]) == {
        "email": "a@b.c", "first_seen": "web", "name": "Ada", "plan": "pro", "signup_source": "ads"}

    signup = spur.event(app, anon, uid(app, 1))
    assert (signup["event"], signup["distinct_id"], signup["time"]) == ("signup", anon, "2024-05-01T12:00:00.000000Z")
    assert subset(signup["properties"], ["plan", "n", "$lib"]) == {"plan": "free", "n": 1, "$lib": "posthog-python"}
    # Transport keys are not event properties.
    assert not {"token", "distinct_id", "$set", "$set_once"} & set(signup["properties"])
    page = spur.event(app, anon, uid(app, 2))
    assert page["properties"]["path"] == "/home"
    purchase = spur.event(app, user, uid(app, 4))
    assert purchase["properties"]["amount"] == 9.5
    assert purchase["properties"]["items"] == '["a","b"]'  # arrays are kept as their JSON text
    assert spur.breakdown(app, "purchase", "amount") == {"9.5": 1, "5.25": 1}
    assert spur.breakdown(app, "$any", "plan") == {"free": 1, "(none)": 7}


def test_posthog_python_retry(spur: Spur, app: str, proxy: FaultProxy) -> None:
    """503 + Retry-After: 1 on the first /batch/: the client resends the same batch, stored once."""
    errors: list = []
    ph = client(app, proxy.url, errors, max_retries=3)
    for i in range(3):
        ph.capture("retried", distinct_id=f"ph-r-{i}", properties={"i": i}, timestamp=T0 + timedelta(seconds=i),
                   uuid=uid(app, i))
    ph.flush(timeout_seconds=30)
    ph.shutdown()
    assert errors == []
    assert proxy.statuses("/ingest/posthog/batch") == [503, 200]
    assert proxy.seen[0].upstream == (200 if proxy.stored else 0)  # lost-answer: the first copy was stored
    first, second = [json.loads(s.body) for s in proxy.seen]
    assert first["sent_at"] != second["sent_at"] and first["batch"] == second["batch"]  # the same events resent
    spur.assert_counts(app, {"retried": 3})


def test_posthog_python_10k_flush_visible(spur: Spur, app: str) -> None:
    """10,000 events, flush(), and the very next query counts all of them."""
    errors: list = []
    ph = client(app, spur.url, errors, max_queue_size=20000)
    n = 10_000
    for i in range(n):
        ph.capture("bulk", distinct_id=f"ph-bulk-{i % 500}", properties={"i": i, "kind": "k%d" % (i % 3)},
                   timestamp=T0 + timedelta(milliseconds=i), uuid=uid(app, i))
    ph.flush(timeout_seconds=120)
    # No sleep, no poll: the acknowledgement is visibility.
    assert spur.counts(app, ["bulk"]) == {"bulk": n, "$any": n}
    ph.shutdown()
    assert errors == []
    assert spur.breakdown(app, "bulk", "kind") == {"k0": 3334, "k1": 3333, "k2": 3333}
