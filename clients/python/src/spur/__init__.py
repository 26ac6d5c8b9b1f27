"""Python client of Spur's HTTP API.

``Client(url, key=None).query(dict) -> Result`` runs a docs/analytics.md §9 query;
``Result.to_pandas()`` gives one tidy DataFrame per result kind and
funnel view (the columns of ``spur query --output csv``, in order). ``Client.send_events`` posts
events to ``POST /api/apps/{app}/events`` as JSON arrays with a Bearer key;
``Client.export`` reads an app's events or users (``GET /api/apps/{app}/export``)
into a DataFrame; ``Client.erase_person`` and ``Client.deletions`` request and list
erasures (docs/storage.md §7).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote

import httpx
import pandas as pd

__all__ = ["Client", "Result", "SpurError"]
__version__ = "0.1.0"

JSON = Dict[str, Any]


class SpurError(Exception):
    """An error answer of the API: docs/analytics.md §9 ``{"error": {code, message, field}}``.

    ``status`` is the HTTP status; ``code`` one of invalid_query,
    invalid_input, limit_exceeded, unauthenticated, forbidden, not_found,
    unavailable, corruption, internal (or conflict for a stale update).
    """

    def __init__(self, status: int, code: str, message: str, field: str = "") -> None:
        super().__init__(f"{code}: {field + ': ' if field else ''}{message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class Result:
    """One query's answer: ``json`` as the API gave it, and DataFrames of it."""

    def __init__(self, query: Mapping[str, Any], json: JSON) -> None:
        self.query = dict(query)
        self.json = json

    @property
    def kind(self) -> str:
        return str(self.json.get("kind", ""))

    @property
    def stats(self) -> JSON:
        return dict(self.json.get("stats", {}))

    @property
    def warnings(self) -> List[JSON]:
        return list(self.json.get("warnings", []))

    def to_pandas(self) -> pd.DataFrame:
        """The result as a tidy DataFrame with the columns of the server's
        CSV (``spur query --output csv``, ``query.WriteCSV``) in order:
        one row per series × bucket then formula × bucket (trend), funnel
        step, bucket or histogram bin (by the funnel's view), retention
        cell, stickiness count, lifecycle bucket × status, path edge,
        attribution channel (then channel × bucket), or listed user
        (cohort). Times are tz-aware Timestamps; empty CSV fields are
        None, NaN or NaT. A query with a ``list`` exports its users as
        CSV: that is ``users_to_pandas()``.
        """
        kind = self.kind
        if kind == "funnel":
            view = self.json.get("view")
            return _funnel_trends(self.json) if view == "trends" else _funnel_times(self.json) if view == "time_to_convert" else _funnel(self.json)
        table = _TABLES.get(kind)
        if table:
            return table(self.json)
        if kind == "cohort":
            return self.users_to_pandas()
        for v in self.json.values():  # a kind this client does not know yet
            if isinstance(v, list) and v and isinstance(v[0], dict):
                return pd.json_normalize(v)
        raise ValueError(f"no tabular form for a {self.kind!r} result")

    def users_to_pandas(self) -> pd.DataFrame:
        """The user ids a query listed (its ``list``, or a cohort's page)."""
        if self.kind == "cohort":
            ids = self.json.get("user_ids", [])
        else:
            ids = (self.json.get("list") or {}).get("user_ids", [])
        return pd.DataFrame({"user_id": pd.Series(ids, dtype="object")})

    def __repr__(self) -> str:
        return f"<spur.Result {self.kind} {self.stats.get('wall_ms', '?')} ms>"


def _frame(rows: List[JSON], cols: List[str], ints: Iterable[str] = (), bools: Iterable[str] = ()) -> pd.DataFrame:
    """A DataFrame of rows in cols' order; ints and bools are nullable
    integer and boolean columns (a CSV's empty fields)."""
    df = pd.DataFrame(rows, columns=cols)
    for c in ints:
        df[c] = df[c].astype("Int64")
    for c in bools:
        df[c] = df[c].astype("boolean")
    return df


def _trend(r: JSON) -> pd.DataFrame:
    cols = ["series", "label", "event", "math", "property", "breakdown_value", "bucket", "value", "incomplete", "total", "period"]
    rows = []
    for s in r.get("series", []):
        for b in s["buckets"]:
            rows.append({"series": s.get("series"), "label": s["label"], "event": s["event"], "math": s["math"],
                         "property": s.get("property"), "breakdown_value": s.get("breakdown_value"), "bucket": pd.Timestamp(b["start"]),
                         "value": b["value"], "incomplete": b["incomplete"], "total": s["total"], "period": s.get("period")})
    for f in r.get("formulas") or []:
        for b in f["buckets"]:
            rows.append({"series": None, "label": f["label"], "event": None, "math": "formula", "property": None,
                         "breakdown_value": f.get("breakdown_value"), "bucket": pd.Timestamp(b["start"]), "value": b["value"],
                         "incomplete": None, "total": f["total"], "period": f.get("period")})
    return _frame(rows, cols, ints=["series"], bools=["incomplete"])


def _groups(r: JSON) -> List[Any]:
    """The funnel's all-users answer (breakdown_value None) then each
    breakdown value's."""
    return [(None, r)] + [(b["value"], b) for b in r.get("breakdown") or []]


def _funnel(r: JSON) -> pd.DataFrame:
    cols = ["breakdown_value", "step", "label", "event", "users", "conversion", "conversion_from_previous", "avg_seconds", "median_seconds"]
    rows = [{"breakdown_value": value, **{c: s.get(c) for c in cols[1:]}} for value, g in _groups(r) for s in g.get("steps") or []]
    return _frame(rows, cols)


def _funnel_trends(r: JSON) -> pd.DataFrame:
    cols = ["breakdown_value", "bucket", "entered", "converted", "conversion", "incomplete"]
    rows = [{"breakdown_value": value, "bucket": pd.Timestamp(b["start"]), "entered": b["entered"], "converted": b["converted"],
             "conversion": b["conversion"], "incomplete": b["incomplete"]} for value, g in _groups(r) for b in g.get("buckets") or []]
    return _frame(rows, cols)


def _funnel_times(r: JSON) -> pd.DataFrame:
    cols = ["breakdown_value", "from_seconds", "to_seconds", "users"]
    rows = [{"breakdown_value": value, **{c: b[c] for c in cols[1:]}} for value, g in _groups(r) for b in g.get("histogram") or []]
    return _frame(rows, cols)


def _retention(r: JSON) -> pd.DataFrame:
    cols = ["cohort_start", "breakdown_value", "size", "period", "retained", "rate", "incomplete"]
    rows = []
    for c in r.get("cohorts", []):
        for k, n in enumerate(c["retained"]):
            rows.append({"cohort_start": pd.Timestamp(c["start"]), "breakdown_value": c.get("breakdown_value"), "size": c["size"],
                         "period": k, "retained": n, "rate": c["rates"][k], "incomplete": c["incomplete"][k]})
    return _frame(rows, cols)


def _stickiness(r: JSON) -> pd.DataFrame:
    cols = ["label", "event", "breakdown_value", "intervals", "users"]
    rows = [{"label": s["label"], "event": s["event"], "breakdown_value": s.get("breakdown_value"), "intervals": i + 1, "users": n}
            for s in r.get("series", []) for i, n in enumerate(s["counts"])]
    return _frame(rows, cols)


_STATUSES = ["new", "returning", "resurrecting", "dormant"]


def _lifecycle(r: JSON) -> pd.DataFrame:
    cols = ["breakdown_value", "bucket", "status", "users", "incomplete"]
    rows = [{"breakdown_value": value, "bucket": pd.Timestamp(b["start"]), "status": st, "users": b[st], "incomplete": b["incomplete"]}
            for value, g in _groups(r) for b in g.get("buckets") or [] for st in _STATUSES]
    return _frame(rows, cols)


def _paths(r: JSON) -> pd.DataFrame:
    cols = ["source", "target", "sessions", "users", "avg_seconds"]
    return _frame([{c: e[c] for c in cols} for e in r.get("edges", [])], cols)


def _attribution(r: JSON) -> pd.DataFrame:
    cols = ["channel", "breakdown_value", "bucket", "conversions", "users", "value", "subsequent_events", "subsequent_value", "incomplete"]

    def row(c: JSON, x: JSON, bucket: Any, incomplete: Any) -> JSON:
        sub = x.get("subsequent")
        return {"channel": c["channel"], "breakdown_value": c.get("breakdown_value"), "bucket": bucket, "conversions": x["conversions"],
                "users": x["users"], "value": x["value"], "subsequent_events": sub["events"] if sub else None,
                "subsequent_value": sub["value"] if sub else None, "incomplete": incomplete}

    chans = r.get("channels", [])
    rows = [row(c, c, None, None) for c in chans]
    rows += [row(c, b, pd.Timestamp(b["start"]), b["incomplete"]) for c in chans for b in c.get("buckets") or []]
    return _frame(rows, cols, bools=["incomplete"])


_TABLES = {"trend": _trend, "retention": _retention, "stickiness": _stickiness, "lifecycle": _lifecycle, "paths": _paths, "attribution": _attribution}


class Client:
    """A client of one Spur server.

    ``url`` is the server's base URL (``http://127.0.0.1:8080``); ``key``
    an API key sent as ``Authorization: Bearer KEY`` (a query key to query,
    an ingest key to send events, an admin key for both; docs/ingest.md §4),
    by default ``$SPUR_KEY``; ``""`` sends none. ``timeout`` is in seconds.
    """

    def __init__(self, url: str, key: Optional[str] = None, timeout: float = 120.0,
                 transport: Optional[httpx.BaseTransport] = None) -> None:
        if key is None:
            key = os.environ.get("SPUR_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=url.rstrip("/") + "/", headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        resp = self._http.request(method, path, **kw)
        if resp.status_code >= 400:
            self._raise(resp)
        return resp

    @staticmethod
    def _raise(resp: httpx.Response) -> None:
        try:
            e = resp.json().get("error", {})
        except ValueError:
            e = {}
        raise SpurError(resp.status_code, e.get("code", "internal"), e.get("message", resp.text[:200]), e.get("field", ""))

    def apps(self) -> List[JSON]:
        """The store's apps: ``[{name, tz, events, …}]``."""
        return list(self._call("GET", "api/apps").json()["apps"])

    def schema(self, app: str) -> JSON:
        """An app's event names and property types with top values."""
        return dict(self._call("GET", f"api/apps/{app}/schema").json())

    def query(self, q: Mapping[str, Any], app: Optional[str] = None) -> Result:
        """Runs a docs/analytics.md §9 query (``app`` defaults to ``q["app"]``); raises SpurError."""
        name = app or q.get("app")
        if not name:
            raise ValueError("the query names no app: give q['app'] or app=")
        return Result(q, self._call("POST", f"api/apps/{name}/query", json=dict(q)).json())

    def query_csv(self, q: Mapping[str, Any], app: Optional[str] = None) -> str:
        """The query's answer as the server's tidy CSV text."""
        name = app or q.get("app")
        return self._call("POST", f"api/apps/{name}/query", params={"output": "csv"}, json=dict(q)).text

    def user_events(self, app: str, user_id: str, offset: int = 0, limit: int = 1000, tz: Optional[str] = None) -> pd.DataFrame:
        """A page of one user's trail: ``time`` (tz-aware), ``event``, ``insert_id`` and one column per property."""
        return self._trail("users", app, user_id, offset, limit, tz, [])

    def _trail(self, kind: str, app: str, id: str, offset: int, limit: int, tz: Optional[str], fixed: List[str]) -> pd.DataFrame:
        params: Dict[str, Any] = {"offset": offset, "limit": limit}
        if tz:
            params["tz"] = tz
        body = self._call("GET", f"api/apps/{app}/{kind}/{quote(id, safe='')}/events", params=params).json()
        rows = [{"time": pd.Timestamp(e["time"]), "event": e["event"], "insert_id": e.get("insert_id"),
                 **{k: e[k] for k in fixed}, **e["properties"]} for e in body["events"]]
        return pd.DataFrame(rows)

    def persons(self, app: str, distinct_id: str) -> JSON:
        """The person of any of its distinct ids (docs/identity.md §1): ``{"person_id",
        "distinct_ids" (sorted), "properties" (folded over its ids), "user_id"}``.
        A distinct id no identity operation named is a person of its own."""
        return dict(self._call("GET", f"api/apps/{app}/persons/{quote(distinct_id, safe='')}").json())

    def person_events(self, app: str, distinct_id: str, offset: int = 0, limit: int = 1000, tz: Optional[str] = None) -> pd.DataFrame:
        """A page of a person's merged trail (all of its distinct ids', in time
        order): as ``user_events``, with the ``distinct_id`` each event was sent with."""
        return self._trail("persons", app, distinct_id, offset, limit, tz, ["distinct_id"])

    def merge(self, app: str, t: str, o: str) -> JSON:
        """Applies merge(t, o) (docs/identity.md §2: always allowed, permanent): o's
        person joins t's. Needs an admin key; returns ``{"merged": [t, o],
        "person_id", "distinct_ids"}``, the person as it is now."""
        return dict(self._call("POST", f"api/apps/{app}/persons/merge", json={"ids": [t, o]}).json())

    def identity_warnings(self, app: str, offset: int = 0, limit: int = 100) -> JSON:
        """The app's refused merges (docs/identity.md §2), newest first: ``{"total",
        "warnings": [{"seq", "time", "op", "ids", "reason"}], …}``."""
        params = {"kind": "identity", "offset": offset, "limit": limit}
        return dict(self._call("GET", f"api/apps/{app}/warnings", params=params).json())

    def property_warnings(self, app: str, offset: int = 0, limit: int = 100) -> JSON:
        """The SDK capture paths' warnings for the app (docs/sdks.md, "Bad values"), newest first:
        ``{"total", "warnings": [{"time", "kind", "index", "field", "message"}], …}`` — kind
        ``"property"`` for a value dropped from a stored event, ``"event"`` for a message left out;
        kept in the server's memory, the newest 1,000 per app since it started."""
        params = {"kind": "property", "offset": offset, "limit": limit}
        return dict(self._call("GET", f"api/apps/{app}/warnings", params=params).json())

    def backup(self, to: str, copy: bool = False) -> JSON:
        """Has the server write a consistent snapshot of the whole store into directory ``to`` on
        its own filesystem (``POST /api/backup``, docs/storage.md §8; an admin key): absolute,
        empty or holding an earlier backup, which is updated incrementally. With ``copy`` the
        segment files are copied, not hard-linked. Returns the report: ``{"dir", "apps",
        "files_linked", "files_copied", "files_kept", "files_removed", "bytes", …,
        "duration_ms"}``. ``spur restore --from DIR --data NEW`` makes a store of it."""
        return dict(self._call("POST", "api/backup", json={"to": to, "copy": copy}).json())

    def person_export(self, app: str, distinct_id: str) -> Tuple[JSON, pd.DataFrame]:
        """A person's data (GDPR Art. 15/20; ``GET /api/apps/{app}/persons/{id}/export``, one
        snapshot): the person ``{"person_id", "distinct_ids", "properties"}`` and its events as a
        DataFrame (``user_id`` — the distinct id each was stored under —, ``event``, ``timestamp``
        (UTC), ``insert_id``, one column per property)."""
        resp = self._call("GET", f"api/apps/{app}/persons/{distinct_id}/export")
        lines = [json.loads(line) for line in resp.text.splitlines() if line.strip()]
        rows = [{"user_id": e["user_id"], "event": e["event"], "timestamp": e["timestamp"],
                 "insert_id": e.get("insert_id"), **e.get("properties", {})} for e in lines[1:]]
        df = pd.DataFrame(rows, columns=None if rows else ["user_id", "event", "timestamp", "insert_id"])
        df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
        return lines[0], df

    def delete_app(self, app: str) -> JSON:
        """Deletes the app whole — events, users, persons, saved objects — and revokes its keys
        (``DELETE /api/apps/{app}``, docs/storage.md §7; an admin key). There is no undo but a
        backup. Returns ``{"app", "files", "bytes", "keys_revoked"}``."""
        return dict(self._call("DELETE", f"api/apps/{app}").json())

    def erase_person(self, app: str, distinct_id: str, suppress: bool = False) -> JSON:
        """Requests the erasure of a person (GDPR Art. 17; ``DELETE /api/apps/{app}/persons/{id}``,
        docs/storage.md §7; an admin key): every event and property of every distinct id of the
        person ``distinct_id`` names. Every query started after the answer leaves the person out;
        the bytes leave the store's files within the server's ``--erase-within`` (default 24 h) or at
        ``spur compact --erase``. With ``suppress`` the person's ids' later events are dropped at
        ingestion too; without it they make a new person. There is no undo. Idempotent: a pending
        request for the id is answered again. Returns the request ``{"id", "kind": "person",
        "requested_at" (RFC 3339 UTC), "status": "pending" | "done", "done_at"?, "suppress"?}``;
        raises SpurError (400 invalid_input for a bad id, 403 without an admin key, 404 for an
        unknown app)."""
        params = {"suppress": "true"} if suppress else None
        return dict(self._call("DELETE", f"api/apps/{quote(app, safe='')}/persons/{quote(distinct_id, safe='')}",
                               params=params).json())

    def delete_events(self, app: str, event: str, range: JSON, where: Optional[List[JSON]] = None,
                      tz: Optional[str] = None) -> JSON:
        """Deletes an app's events by predicate (``POST /api/apps/{app}/delete``, docs/storage.md §7;
        an admin key): those named ``event`` (``"$any"``: every event) whose event properties pass
        ``where`` (docs/analytics.md §3 filters, e.g. ``[{"property": "build", "op": "eq", "value":
        "7.1"}]``) with a time in ``range`` (``{"from", "to"}`` or ``{"last"}``; dates at midnight in
        ``tz``, default the app's), stored before the request. Every query started after the answer
        leaves them out; their bytes go as an erasure's. Returns the request (``{"id", "kind":
        "events", "requested_at", "status", "match": {"event", "where", "from", "to"}}``); raises
        SpurError (400 invalid_query naming the field, 403 without an admin key, 404 for an unknown
        app)."""
        body: JSON = {"event": event, "range": range}
        if where is not None:
            body["where"] = where
        if tz is not None:
            body["tz"] = tz
        return dict(self._call("POST", f"api/apps/{quote(app, safe='')}/delete", json=body).json())

    def deletions(self, app: str) -> List[JSON]:
        """The app's deletion requests in request order (``GET /api/apps/{app}/deletions``; an admin
        key), each as ``erase_person`` returns it; never the ids they erase. ``pd.DataFrame(...)``
        of the list makes a table of them."""
        return list(self._call("GET", f"api/apps/{quote(app, safe='')}/deletions").json()["deletions"])

    def set_retention(self, app: str, retention: str) -> JSON:
        """Sets the app's events retention (``PATCH /api/apps/{app}``, docs/storage.md §7; an admin
        key): ``"400d"`` (days), ``"36h"`` (hours) or ``"none"`` to keep everything. From the
        answer on, queries see only events newer than the clock minus it, older events are
        rejected live and skipped by imports, and compaction removes them. Returns the app's
        settings ``{"app", "tz", "shards", "retention"}``."""
        return dict(self._call("PATCH", f"api/apps/{quote(app, safe='')}", json={"retention": retention}).json())

    def export(self, app: str, users: bool = False, since: Optional[str] = None, until: Optional[str] = None) -> pd.DataFrame:
        """An app's events, or with ``users=True`` its users' current properties, as one DataFrame.

        Reads the NDJSON export (``GET /api/apps/{app}/export``, one snapshot,
        streamed line by line; docs/storage.md §8). Events: ``user_id``,
        ``event``, ``timestamp`` (tz-aware UTC, exact to the microsecond),
        ``insert_id`` (None when the event has none) and one column per
        property, in the server's order (user, then time); users:
        ``user_id`` and one column per property. A property an event lacks is
        NaN/None. JSON has no time type: time properties are RFC 3339
        strings. ``since`` and ``until`` (timestamps) bound the events to
        ``since <= timestamp < until``; give both or neither. Needs a
        query or admin key.
        """
        params: Dict[str, Any] = {"format": "ndjson"}
        if users:
            params["users"] = "true"
        if (since is None) != (until is None):
            raise ValueError("give both since and until, or neither")
        if since is not None:
            params["from"], params["to"] = since, until
        path = f"api/apps/{quote(app, safe='')}/export"
        rows: List[JSON] = []
        with self._http.stream("GET", path, params=params) as resp:
            if resp.status_code >= 400:
                resp.read()
                self._raise(resp)
            for line in resp.iter_lines():
                if not line:
                    continue
                r = json.loads(line)
                props = r.pop("properties", {})
                if not users:
                    r.setdefault("insert_id", None)
                rows.append({**r, **props})
        fixed = ["user_id"] if users else ["user_id", "event", "timestamp", "insert_id"]
        df = pd.DataFrame(rows)
        if df.empty:
            return pd.DataFrame(columns=fixed)
        if not users:
            df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
        return df[fixed + [c for c in df.columns if c not in fixed]]

    def send_events(self, app: str, events: Iterable[Mapping[str, Any]], batch: int = 1000) -> JSON:
        """Sends events (docs/ingest.md §1 shape) as JSON arrays of at most
        ``batch`` events; returns ``{"accepted": N, "rejected": [...]}``
        summed over the batches, ``index`` counted over all events.
        """
        total: JSON = {"accepted": 0, "rejected": []}
        chunk: List[JSON] = []
        sent = 0

        def flush() -> None:
            nonlocal sent
            if not chunk:
                return
            body = self._call("POST", f"api/apps/{app}/events", json=chunk).json()
            total["accepted"] += int(body.get("accepted", 0))
            for r in body.get("rejected", []):
                total["rejected"].append({**r, "index": sent + int(r.get("index", 0))})
            sent += len(chunk)
            chunk.clear()

        for ev in events:
            chunk.append(dict(ev))
            if len(chunk) >= batch:
                flush()
        flush()
        return total
