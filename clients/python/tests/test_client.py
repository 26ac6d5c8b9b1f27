"""The client against a real server: every result kind as a DataFrame
whose numbers equal the JSON answer, errors, the trail, send_events."""

from __future__ import annotations

import io
import math

import httpx
import pandas as pd
import pytest

from spur import Client, Result, SpurError

RANGE = {"from": "2021-04-26", "to": "2021-12-06"}


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
    # The DataFrame equals the server's own CSV.
    csv = pd.read_csv(io.StringIO(client.query_csv(q)), keep_default_na=False, na_values={"avg_seconds": [""], "median_seconds": [""]})
    assert list(csv.users) == list(df.users)
    assert list(csv.conversion) == list(df.conversion)


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
    # A trend point's users (spec §7) as a DataFrame: as many as counted.
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
    res = Result({}, {"kind": "paths", "edges": [{"source": "1_a", "target": "2_b", "sessions": 3, "users": 2, "avg_seconds": 1.5}]})
    df = res.to_pandas()
    assert list(df.columns) == ["source", "target", "sessions", "users", "avg_seconds"] and df.sessions.iloc[0] == 3


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
