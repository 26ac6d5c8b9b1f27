"""The client against a real server: every result kind as a DataFrame
whose numbers equal the JSON answer, errors, the trail, send_events."""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict

import httpx
import numpy as np
import pandas as pd
import pytest

from spur import Client, Result, SpurError

RANGE = {"from": "2021-04-26", "to": "2021-12-06"}
SHOP = {"from": "2024-02-01", "to": "2024-03-01"}  # the generator's app "shop" (run-tests.sh makes it)


def test_trend_every_point(client: Client) -> None:
    q = {"kind": "trend", "app": "cardano", "range": RANGE, "tz": "Europe/Berlin", "interval": "week",
         "series": [{"event": "answer", "math": "users"}, {"event": "badge", "math": "p90", "property": "value"}],
         "breakdown": {"property": "up_votes", "source": "user", "limit": 2}}
    res = client.query(q)
    df = res.to_pandas()
    series = res.json["series"]
    assert len(series) == 6  # 2 series × (2 values + "(other)")
    assert len(df) == sum(len(s["buckets"]) for s in series)
    for s in series:
        part = df[(df.series == s["series"]) & (df.breakdown_value == s["breakdown_value"])]
        assert list(part.value) == [b["value"] for b in s["buckets"]]
        assert list(part.incomplete) == [b["incomplete"] for b in s["buckets"]]
        assert (part.total == s["total"]).all()
        assert [t.isoformat() for t in part.bucket] == [b["start"] for b in s["buckets"]]
    assert df.bucket.iloc[0].utcoffset() is not None  # starts keep the query zone's offset
    assert df.value.sum() > 0


def test_funnel_steps_and_breakdown(client: Client) -> None:
    q = {"kind": "funnel", "app": "cardano", "range": RANGE, "steps": [{"event": "signup"}, {"event": "question"}, {"event": "answer"}],
         "window": "30d", "breakdown": {"property": "up_votes", "source": "user", "limit": 3}}
    res = client.query(q)
    df = res.to_pandas()
    all_users = df[df.breakdown_value.isna()]
    assert list(all_users.users) == [s["users"] for s in res.json["steps"]]
    assert list(all_users.conversion) == [s["conversion"] for s in res.json["steps"]]
    assert math.isnan(all_users.avg_seconds.iloc[0]) and all_users.avg_seconds.iloc[1] == res.json["steps"][1]["avg_seconds"]
    for b in res.json["breakdown"]:
        part = df[df.breakdown_value == b["value"]]
        assert list(part.step) == [1, 2, 3]
        assert list(part.users) == [s["users"] for s in b["steps"]]
        assert list(part.median_seconds.fillna(-1)) == [s["median_seconds"] if s["median_seconds"] is not None else -1 for s in b["steps"]]
    assert_matches_csv(client, q)


def test_retention_cells(client: Client) -> None:
    q = {"kind": "retention", "app": "cardano", "range": {"from": "2021-10-04", "to": "2021-12-06"}, "start": {"event": "signup"},
         "period": "week", "periods": 6, "type": "recurring", "criterion": "on_or_after",
         "breakdown": {"property": "up_votes", "source": "user", "limit": 2}}
    res = client.query(q)
    df = res.to_pandas()
    cohorts = res.json["cohorts"]
    assert len(df) == sum(len(c["retained"]) for c in cohorts) > 0
    for c in cohorts:
        part = df[(df.cohort_start == pd.Timestamp(c["start"])) & (df.breakdown_value == c["breakdown_value"])]
        assert list(part.retained) == c["retained"]
        assert list(part.rate) == c["rates"]
        assert list(part.incomplete) == c["incomplete"]
        assert (part["size"] == c["size"]).all()


def test_cohort_and_lists(client: Client) -> None:
    cohort = {"and": [{"performed": {"event": "answer"}, "count": {"op": "gte", "value": 2}},
                      {"user_property": {"property": "reputation", "op": "gte", "value": 100}}]}
    res = client.query({"kind": "cohort", "app": "cardano", "cohort": cohort, "list": {"limit": 500}})
    df = res.to_pandas()
    assert list(df.user_id) == res.json["user_ids"] and len(df) == res.json["users"] > 0
    # A trend point's users (docs/analytics.md §7) as a DataFrame: as many as counted.
    tq = {"kind": "trend", "app": "cardano", "range": RANGE, "interval": "month", "series": [{"event": "answer", "math": "users"}]}
    point = client.query(tq).json["series"][0]["buckets"][1]
    listed = client.query({**tq, "list": {"series": 0, "bucket": point["start"], "limit": 1000}})
    assert len(listed.users_to_pandas()) == listed.json["list"]["users"] == point["value"]
    trail = client.user_events("cardano", str(df.user_id.iloc[0]), tz="Asia/Tokyo")
    assert (trail.event == "answer").sum() >= 2
    assert trail.time.is_monotonic_increasing


def test_errors(client: Client) -> None:
    with pytest.raises(SpurError) as e:
        client.query({"kind": "funnel", "app": "cardano", "steps": [{"event": "signup"}]})
    assert e.value.status == 400 and e.value.code == "invalid_query" and e.value.field == "steps"
    with pytest.raises(SpurError) as e:
        client.query({"kind": "trend", "app": "nope", "series": [{"event": "x"}]})
    assert e.value.status == 404
    with pytest.raises(ValueError):
        client.query({"kind": "trend"})
    assert {a["name"] for a in client.apps()} >= {"cardano", "otto"}
    assert any(e["name"] == "signup" for e in client.schema("cardano")["event_names"])


def test_unknown_kind_is_normalized() -> None:
    res = Result({}, {"kind": "future", "rows": [{"a": "x", "n": 3}]})
    df = res.to_pandas()
    assert list(df.columns) == ["a", "n"] and df.n.iloc[0] == 3


def _same(v: Any, text: str) -> bool:
    """Whether a DataFrame cell holds what the CSV field says: an empty
    field is a null, true/false a boolean, a time the same instant, a
    number the same number, else the same text."""
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return text == ""
    if isinstance(v, (bool, np.bool_)):
        return text == ("true" if v else "false")
    if isinstance(v, pd.Timestamp):
        return text != "" and pd.Timestamp(text) == v and pd.Timestamp(text).utcoffset() == v.utcoffset()
    if isinstance(v, (int, float, np.integer, np.floating)):
        return text != "" and float(text) == float(v)
    return str(v) == text


def assert_matches_csv(client: Client, q: Dict[str, Any]) -> pd.DataFrame:
    """to_pandas() of q equals the server's CSV of q column for column,
    row for row, cell for cell."""
    df = client.query(q).to_pandas()
    header, *body = list(csv.reader(io.StringIO(client.query_csv(q))))
    assert list(df.columns) == header
    assert len(df) == len(body) > 0
    for i, (rec, line) in enumerate(zip(df.itertuples(index=False), body)):
        for col, v, text in zip(header, rec, line):
            assert _same(v, text), f"{q['kind']} row {i} {col}: DataFrame {v!r}, CSV {text!r}"
    return df


# One query per kind and funnel view, with the options that change the
# CSV's shape (breakdowns, formulas, compare, subsequent events, buckets).
CSV_QUERIES = {
    "trend-formulas-compare": {"kind": "trend", "app": "cardano", "range": {"from": "2021-06-01", "to": "2021-07-15"}, "interval": "week",
                               "series": [{"event": "answer", "math": "users"}, {"event": "badge", "math": "p90", "property": "value"}],
                               "breakdown": {"property": "up_votes", "source": "user", "limit": 2}, "formulas": ["A / B"], "compare": "previous"},
    "funnel-steps-unordered": {"kind": "funnel", "app": "cardano", "range": RANGE, "order": "unordered", "window": "7d",
                               "steps": [{"event": "question"}, {"event": "answer"}, {"event": "comment"}],
                               "breakdown": {"property": "detail", "limit": 2, "attribution": "first_touch"}},
    "funnel-trends": {"kind": "funnel", "app": "cardano", "range": {"from": "2021-05-03", "to": "2021-06-14"}, "now": "2021-06-10T00:00:00Z",
                      "steps": [{"event": "signup"}, {"event": "comment"}], "window": "14d", "view": "trends", "interval": "week",
                      "breakdown": {"property": "up_votes", "source": "user", "limit": 2}},
    "funnel-time-to-convert": {"kind": "funnel", "app": "cardano", "range": RANGE, "steps": [{"event": "question"}, {"event": "answer"}],
                               "window": "7d", "view": "time_to_convert", "bins": 6, "tz": "Asia/Tokyo",
                               "breakdown": {"property": "up_votes", "source": "user", "limit": 1}},
    "retention": {"kind": "retention", "app": "cardano", "range": {"from": "2021-10-04", "to": "2021-12-06"}, "start": {"event": "signup"},
                  "period": "week", "periods": 4, "breakdown": {"property": "up_votes", "source": "user", "limit": 1}},
    "stickiness": {"kind": "stickiness", "app": "cardano", "range": {"from": "2021-05-03", "to": "2021-06-28"}, "interval": "week",
                   "series": [{"event": "answer"}, {"event": "comment", "label": "commenters"}], "cumulative": True,
                   "breakdown": {"property": "up_votes", "source": "user", "limit": 2}},
    "lifecycle": {"kind": "lifecycle", "app": "cardano", "range": {"from": "2021-10-01", "to": "2021-12-06"}, "interval": "month",
                  "tz": "Europe/Berlin", "event": "answer", "breakdown": {"property": "up_votes", "source": "user", "limit": 1}},
    "paths": {"kind": "paths", "app": "cardano", "range": RANGE, "start": {"event": "signup"}, "steps": 4, "max_edges": 12},
    "attribution-subsequent": {"kind": "attribution", "app": "shop", "range": SHOP, "conversion": {"event": "install"},
                               "touchpoints": [{"event": "ad_click", "lookback": "7d"}, {"event": "ad_impression", "lookback": "7d"}],
                               "channel": "channel", "model": "time_decay", "half_life": "1d", "interval": "week",
                               "subsequent": {"event": "purchase", "window": "30d", "value": "revenue"},
                               "breakdown": {"property": "platform", "source": "user", "limit": 2}},
    "attribution-value": {"kind": "attribution", "app": "shop", "range": SHOP, "conversion": {"event": "purchase"}, "conversions": "first",
                          "value": "revenue", "touchpoints": [{"event": "ad_click", "lookback": "30d"}], "channel": "channel", "model": "linear"},
}


@pytest.mark.parametrize("name", sorted(CSV_QUERIES))
def test_to_pandas_equals_the_servers_csv(client: Client, name: str) -> None:
    df = assert_matches_csv(client, CSV_QUERIES[name])
    if name.startswith("trend"):
        assert (df.math == "formula").sum() > 0 and set(df.period) == {"current", "previous"}
    if name == "funnel-steps-unordered":
        assert df.event.isna().all() and list(df.label[:3]) == ["1 step", "2 steps", "3 steps"]
    if name == "attribution-subsequent":
        assert df.bucket.isna().any() and df.bucket.notna().any() and df.subsequent_events.notna().all()


def test_listed_users_equal_the_servers_csv(client: Client) -> None:
    # A query with a list exports its users: users_to_pandas() is that CSV.
    q = {**CSV_QUERIES["lifecycle"], "list": {"bucket": "2021-11-15", "status": "dormant", "breakdown_value": "0", "limit": 20}}
    res = client.query(q)
    header, *body = list(csv.reader(io.StringIO(client.query_csv(q))))
    assert header == ["user_id"]
    assert list(res.users_to_pandas().user_id) == [r[0] for r in body] == res.json["list"]["user_ids"]
    assert len(body) == min(20, res.json["list"]["users"]) > 0


def test_send_events_sends_json_arrays_with_a_bearer_key() -> None:
    seen = []

    def handler(req: httpx.Request) -> httpx.Response:
        import json
        body = json.loads(req.content)
        seen.append((req.method, req.url.path, req.headers["authorization"], req.headers["content-type"], len(body)))
        return httpx.Response(200, json={"accepted": len(body) - 1, "rejected": [{"index": 0, "field": "user_id", "message": "empty"}]})

    with Client("http://spur.test", key="k-123", transport=httpx.MockTransport(handler)) as c:
        out = c.send_events("shop", ({"user_id": f"u{i}", "event": "e"} for i in range(5)), batch=2)
    assert seen == [("POST", "/api/apps/shop/events", "Bearer k-123", "application/json", n) for n in (2, 2, 1)]
    assert out["accepted"] == 2 and [r["index"] for r in out["rejected"]] == [0, 2, 4]


def test_send_events_to_the_server(client: Client, server_url: str) -> None:
    created = client._call("POST", "api/keys", json={"scope": "ingest", "app": "pyclient"}).json()
    with Client(server_url, key=created["key"]) as ingest:
        out = ingest.send_events("pyclient", [{"user_id": "p1", "event": "signup", "timestamp": "2026-01-01T00:00:00Z"},
                                              {"user_id": "", "event": "signup"}])
        assert out["accepted"] == 1 and [(r["index"], r["field"]) for r in out["rejected"]] == [(1, "user_id")]
        with pytest.raises(SpurError) as e:  # an ingest key cannot read
            ingest.query({"kind": "trend", "app": "pyclient", "series": [{"event": "signup"}]})
        assert e.value.status == 403 and e.value.code == "forbidden"
    res = client.query({"kind": "trend", "app": "pyclient", "range": {"from": "2026-01-01", "to": "2026-01-02"}, "series": [{"event": "signup"}]})
    assert res.to_pandas().value.sum() == 1


def test_keys(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Client(server_url, key="") as anon, pytest.raises(SpurError) as e:
        anon.apps()
    assert e.value.status == 401 and e.value.code == "unauthenticated"
    monkeypatch.setenv("SPUR_KEY", "spur_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    with Client(server_url) as env, pytest.raises(SpurError) as e:  # the key from $SPUR_KEY
        env.apps()
    assert e.value.status == 401 and "unknown API key" in str(e.value)


def test_export_to_pandas(client: Client, server_url: str) -> None:
    df = client.export("cardano")
    count = client.query({"kind": "trend", "app": "cardano", "range": RANGE, "interval": "month",
                          "series": [{"event": "$any"}]}).to_pandas().value.sum()
    assert len(df) == count == 13206
    assert list(df.columns[:4]) == ["user_id", "event", "timestamp", "insert_id"]
    assert {"detail", "object_id", "value"} <= set(df.columns)
    assert str(df.timestamp.dt.tz) == "UTC"
    for _, g in df.groupby("user_id", sort=False):  # a user's events in time order
        assert g.timestamp.is_monotonic_increasing
    users = client.export("cardano", users=True)
    assert len(users) == 3988 and users.user_id.is_unique and {"reputation", "up_votes"} <= set(users.columns)
    part = client.export("cardano", since="2021-06-01", until="2021-07-01")
    assert 0 < len(part) < len(df) and part.timestamp.min() >= pd.Timestamp("2021-06-01", tz="UTC")

    created = client._call("POST", "api/keys", json={"scope": "ingest", "app": "pyexport"}).json()
    with Client(server_url, key=created["key"]) as ingest:
        ingest.send_events("pyexport", [{"user_id": "e1", "event": "buy", "timestamp": "2026-01-01T00:00:00.123456Z",
                                         "insert_id": "i1", "properties": {"n": 3, "f": 2.0, "ok": True, "s": "x"}}])
        with pytest.raises(SpurError) as e:  # an ingest key cannot read
            ingest.export("pyexport")
        assert e.value.status == 403
    got = client.export("pyexport").iloc[0]
    assert got.timestamp == pd.Timestamp("2026-01-01T00:00:00.123456Z")
    assert (got.insert_id, got.n, got.f, got.ok, got.s) == ("i1", 3, 2.0, True, "x")
    assert isinstance(got.f, float) and not isinstance(got.n, float)
    with pytest.raises(SpurError) as e:
        client.export("nosuchapp")
    assert e.value.status == 404 and e.value.code == "not_found"


def test_persons_merge_and_trail(client: Client) -> None:
    out = client.send_events("pypersons", [
        {"user_id": "d1", "event": "view", "timestamp": "2026-01-01T10:00:00Z", "user_properties": {"plan": "free"}},
        {"user_id": "u1", "anonymous_id": "d1", "event": "signup", "timestamp": "2026-01-01T11:00:00Z", "user_properties": {"plan": "pro"}},
        {"user_id": "d2", "event": "view", "timestamp": "2026-01-02T10:00:00Z"},
        {"user_id": "u2", "event": "signup", "timestamp": "2026-01-02T11:00:00Z"},
        {"user_id": "u3", "anonymous_id": "d1", "event": "login", "timestamp": "2026-01-03T00:00:00Z"}])
    assert out == {"accepted": 5, "rejected": []}
    p = client.persons("pypersons", "d1")  # visible once acknowledged
    assert (p["person_id"], p["distinct_ids"], p["properties"]) == ("u1", ["d1", "u1"], {"plan": "pro"})
    assert client.persons("pypersons", "d2")["distinct_ids"] == ["d2"]
    merged = client.merge("pypersons", "u2", "d2")
    assert merged["merged"] == ["u2", "d2"] and (merged["person_id"], merged["distinct_ids"]) == ("u2", ["d2", "u2"])
    trail = client.person_events("pypersons", "d2", tz="UTC")
    assert list(trail.event) == ["view", "signup"] and list(trail.distinct_id) == ["d2", "u2"]
    assert str(trail.time.iloc[0]) == "2026-01-02 10:00:00+00:00"
    funnel = client.query({"kind": "funnel", "app": "pypersons", "range": {"from": "2026-01-01", "to": "2026-01-04"},
                           "steps": [{"event": "view"}, {"event": "signup"}], "window": "1d"})
    assert [s["users"] for s in funnel.json["steps"]] == [2, 2]  # per person: both anonymous views convert
    warnings = client.identity_warnings("pypersons")  # identify(u3, d1): d1's person is identified already
    assert warnings["total"] == 1 and warnings["warnings"][0]["ids"] == ["u3", "d1"] and warnings["warnings"][0]["op"] == "identify"
    with pytest.raises(SpurError) as e:
        client.merge("pypersons", "u2", "")
    assert e.value.status == 400 and e.value.field == "ids[1]"


def test_property_warnings_and_backup(client: Client, server_url: str, tmp_path: Path) -> None:
    # A PostHog batch through the capture path: n is an int, then a string (dropped, event kept).
    body = {"api_key": "pycapture", "batch": [
        {"event": "e", "distinct_id": "c1", "uuid": "c-1", "timestamp": "2026-01-01T10:00:00Z", "properties": {"n": 1}},
        {"event": "e", "distinct_id": "c1", "uuid": "c-2", "timestamp": "2026-01-01T10:00:01Z", "properties": {"n": "x"}}]}
    key = client._call("POST", "api/keys", json={"scope": "ingest", "app": "pycapture"}).json()["key"]
    body["api_key"] = key
    r = httpx.post(server_url + "ingest/posthog/batch/", json=body)
    assert (r.status_code, r.json()) == (200, {"status": 1})
    w = client.property_warnings("pycapture")
    assert w["total"] == 1 and (w["warnings"][0]["kind"], w["warnings"][0]["field"]) == ("property", "properties.n")
    rep = client.backup(str(tmp_path / "bk"))
    assert "pycapture" in [a["app"] for a in rep["apps"]] and rep["files_linked"] + rep["files_copied"] > 0
    again = client.backup(str(tmp_path / "bk"))
    assert again["files_linked"] + again["files_copied"] == 0 and again["files_kept"] > 0


def test_delete_app(client: Client) -> None:
    client.send_events("pydoomed", [{"user_id": "u", "event": "e", "timestamp": "2026-01-01T00:00:00Z"}])
    assert "pydoomed" in [a["name"] for a in client.apps()]
    out = client.delete_app("pydoomed")
    assert out["app"] == "pydoomed" and out["files"] > 0
    assert "pydoomed" not in [a["name"] for a in client.apps()]
    with pytest.raises(SpurError) as e:
        client.delete_app("pydoomed")
    assert e.value.status == 404


def test_set_retention(client: Client) -> None:
    now = datetime.now(timezone.utc)
    day = lambda n: (now - timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    client.send_events("pyretained", [{"user_id": "u", "event": "e", "timestamp": day(10)}])
    out = client.set_retention("pyretained", "400d")
    assert out["app"] == "pyretained" and out["retention"] == "400d"
    assert [a["retention"] for a in client.apps() if a["name"] == "pyretained"] == ["400d"]
    with pytest.raises(SpurError) as e:
        client.set_retention("pyretained", "soon")
    assert e.value.status == 400 and e.value.field == "retention"
    assert client.set_retention("pyretained", "none")["retention"] == "none"


def test_person_export(client: Client) -> None:
    client.send_events("pyexport", [
        {"user_id": "d9", "event": "view", "timestamp": "2026-01-01T10:00:00Z", "insert_id": "a", "properties": {"page": "/"}},
        {"user_id": "u9", "anonymous_id": "d9", "event": "signup", "timestamp": "2026-01-01T11:00:00Z",
         "user_properties": {"plan": "pro"}}])
    person, events = client.person_export("pyexport", "d9")
    assert (person["person_id"], person["distinct_ids"], person["properties"]) == ("u9", ["d9", "u9"], {"plan": "pro"})
    assert list(events.user_id) == ["d9", "u9"] and list(events.event) == ["view", "signup"]
    assert events.page.iloc[0] == "/" and str(events.timestamp.iloc[1]) == "2026-01-01 11:00:00+00:00"


def test_delete_events(client: Client) -> None:
    day = {"from": "2026-01-01", "to": "2026-01-02"}
    client.send_events("pydelete", [
        {"user_id": "a", "event": "click", "timestamp": "2026-01-01T10:00:00Z", "properties": {"build": "7.1"}},
        {"user_id": "a", "event": "click", "timestamp": "2026-01-01T11:00:00Z", "properties": {"build": "7.2"}},
        {"user_id": "b", "event": "click", "timestamp": "2026-01-01T12:00:00Z", "properties": {"build": "7.1"}},
        {"user_id": "b", "event": "view", "timestamp": "2026-01-01T12:00:00Z", "properties": {"build": "7.1"}}])
    total = {"kind": "trend", "app": "pydelete", "range": day, "tz": "UTC", "series": [{"event": "$any"}]}
    assert client.query(total).to_pandas().value.sum() == 4
    req = client.delete_events("pydelete", "click", day, where=[{"property": "build", "op": "eq", "value": "7.1"}])
    assert (req["kind"], req["status"], req["match"]["event"]) == ("events", "pending", "click")
    assert client.query(total).to_pandas().value.sum() == 2  # the 7.1 clicks are gone at once
    assert list(client.person_events("pydelete", "b").event) == ["view"]
    assert client.deletions("pydelete")[0]["id"] == req["id"]
    with pytest.raises(SpurError) as e:
        client.delete_events("pydelete", "click", day, where=[{"property": "nope", "op": "is_set"}])
    assert e.value.status == 400 and e.value.field == "where[0].property"


def test_erase_person(client: Client, server_url: str) -> None:
    day = {"from": "2026-01-01", "to": "2026-01-02"}
    client.send_events("pyerase", [
        {"user_id": "d5", "event": "view", "timestamp": "2026-01-01T10:00:00Z"},
        {"user_id": "u5", "anonymous_id": "d5", "event": "signup", "timestamp": "2026-01-01T11:00:00Z", "user_properties": {"plan": "pro"}},
        {"user_id": "s5", "event": "view", "timestamp": "2026-01-01T12:00:00Z"},
        {"user_id": "keep", "event": "view", "timestamp": "2026-01-01T13:00:00Z"}])
    users = {"kind": "trend", "app": "pyerase", "range": day, "tz": "UTC", "series": [{"event": "view", "math": "users"}]}
    assert client.query(users).to_pandas().value.sum() == 3
    req = client.erase_person("pyerase", "d5")  # any distinct id of the person: d5's and u5's events go
    assert (req["kind"], req["status"]) == ("person", "pending") and req["id"].startswith("del-") and "done_at" not in req
    assert pd.Timestamp(req["requested_at"]).tzinfo is not None and not req.get("suppress")
    assert client.query(users).to_pandas().value.sum() == 2  # every query after the answer leaves the person out
    for id in ("d5", "u5"):
        assert client.person_events("pyerase", id).empty
    assert client.persons("pyerase", "u5")["properties"] == {}
    assert client.erase_person("pyerase", "d5")["id"] == req["id"]  # idempotent: the pending request again
    sup = client.erase_person("pyerase", "s5", suppress=True)
    assert sup["suppress"] is True and sup["id"] != req["id"]
    client.send_events("pyerase", [{"user_id": "s5", "event": "view", "timestamp": "2026-01-01T14:00:00Z"},
                                   {"user_id": "d5", "event": "view", "timestamp": "2026-01-01T14:00:00Z"}])
    assert client.person_events("pyerase", "s5").empty  # suppressed: its later events are dropped
    assert list(client.person_events("pyerase", "d5").event) == ["view"]  # not suppressed: a new person
    dels = client.deletions("pyerase")
    assert [(d["id"], d["kind"], d["status"]) for d in dels] == [(req["id"], "person", "pending"), (sup["id"], "person", "pending")]
    assert dels[0] == req
    assert not any(v in ("d5", "u5", "s5") for d in dels for v in d.values())  # the list never names the erased ids
    with pytest.raises(SpurError) as e:
        client.erase_person("nosuchapp", "x")
    assert e.value.status == 404
    with pytest.raises(SpurError) as e:
        client.erase_person("pyerase", "x" * 300)
    assert e.value.status == 400 and e.value.field == "id"
    key = client._call("POST", "api/keys", json={"scope": "query", "app": "pyerase"}).json()["key"]
    with Client(server_url, key=key) as reader:
        for call in (lambda: reader.erase_person("pyerase", "keep"), lambda: reader.deletions("pyerase")):
            with pytest.raises(SpurError) as e:
                call()
            assert e.value.status == 403
