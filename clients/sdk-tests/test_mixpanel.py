"""mixpanel (PyPI) 5.4.1 against `spur serve`: track with $device_id / $user_id (Simplified ID
Merge), people_set and people_set_once via /engage, alias, and import_data via /import.

Mixpanel.alias() builds a fresh default Consumer (the vendor's host) whatever consumer the client
has (the protocol notes call it a trap), so the test patches mixpanel.Consumer for that call. Mixpanel's Python
Consumer retries only over https (a urllib3 adapter mounted on https://), so no retry test here.
"""

from __future__ import annotations

import mixpanel
from mixpanel import BufferedConsumer, Consumer, Mixpanel

from spurtest import Spur, subset

T0 = 1714564800  # 2024-05-01T12:00:00Z, seconds


def urls(base: str) -> dict:
    m = base + "/ingest/mixpanel"
    return {"events_url": m + "/track", "people_url": m + "/engage", "groups_url": m + "/groups",
            "import_url": m + "/import"}


def test_mixpanel_python(spur: Spur, app: str, monkeypatch) -> None:
    buffered = BufferedConsumer(max_size=50, **urls(spur.url))
    mp = Mixpanel(app, consumer=buffered)
    dev, user, alias = "mp-device-1", "mp-user-1", "mp-alias-1"

    def track(distinct: str, name: str, i: int, props: dict) -> None:
        mp.track(distinct, name, {"time": T0 + i, "$insert_id": f"mp-{i}", **props})

    track(dev, "signup", 0, {"$device_id": dev, "plan": "free", "n": 1})
    track(user, "login", 1, {"$device_id": dev, "$user_id": user})  # links the device to the user
    track(user, "purchase", 2, {"$user_id": user, "amount": 9.5, "items": ["a", "b"]})
    mp.people_set(user, {"name": "Ada", "$email": "a@b.c"}, meta={"$time": (T0 + 3) * 1000})
    mp.people_set_once(user, {"signup_source": "ads"}, meta={"$time": (T0 + 4) * 1000})
    track(dev, "signup", 0, {"$device_id": dev, "plan": "free", "n": 1})  # a duplicate: one event
    buffered.flush()

    # alias(T=user, O=alias): the trap — point the Consumer it builds at Spur.
    monkeypatch.setattr(mixpanel, "Consumer", lambda *a, **kw: Consumer(**urls(spur.url)))
    mp.alias(alias, user, meta={"properties": {"distinct_id": user, "alias": alias, "token": app,
                                               "time": T0 + 5, "$insert_id": "mp-5"}})
    monkeypatch.undo()
    track(alias, "purchase", 6, {"amount": 5.25})
    buffered.flush()

    # A people update is stored as an event "$set" of its distinct id.
    spur.assert_counts(app, {"signup": 1, "login": 1, "purchase": 2, "$set": 2, "$create_alias": 1})
    person = spur.assert_one_person(app, [dev, user, alias], person_id=user)
    assert subset(person["properties"], ["name", "$email", "signup_source"]) == {
        "name": "Ada", "$email": "a@b.c", "signup_source": "ads"}
    signup = spur.event(app, dev, "mp-0")
    assert (signup["event"], signup["distinct_id"], signup["time"]) == ("signup", dev, "2024-05-01T12:00:00.000000Z")
    assert subset(signup["properties"], ["plan", "n", "mp_lib"]) == {"plan": "free", "n": 1, "mp_lib": "python"}
    # Transport keys are not properties.
    assert not {"token", "distinct_id", "time", "$insert_id"} & set(signup["properties"])
    purchase = spur.event(app, user, "mp-2")
    assert purchase["properties"]["items"] == '["a","b"]'
    assert spur.breakdown(app, "purchase", "amount") == {"9.5": 1, "5.25": 1}


def test_mixpanel_python_import(spur: Spur, app: str) -> None:
    """import_data() posts the form (data=, verbose=1, api_key=) with Basic auth (the key as the
    user) to /import, and raises unless the answer is {"status": 1, ...}, as for /track."""
    imp = Mixpanel(app, consumer=Consumer(**urls(spur.url)))
    imp.import_data(None, "mp-user-1", "imported", T0 + 7, {"$insert_id": "mp-7", "source": "batch"}, api_secret=app)
    spur.assert_counts(app, {"imported": 1})
    assert spur.event(app, "mp-user-1", "mp-7")["properties"]["source"] == "batch"
