"""Python client of Spur's HTTP API.

``Client(url, key=None).query(dict) -> Result`` runs a spec §9 query;
``Result.to_pandas()`` gives one tidy DataFrame per result kind (the
columns of ``spur query --output csv``). ``Client.send_events`` posts
events to ``POST /api/apps/{app}/events`` as JSON arrays with a Bearer key.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional
from urllib.parse import quote

import httpx
import pandas as pd

__all__ = ["Client", "Result", "SpurError"]
__version__ = "0.1.0"

JSON = Dict[str, Any]


class SpurError(Exception):
    """An error answer of the API: spec §9 ``{"error": {code, message, field}}``.

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
        """The result as a tidy DataFrame: one row per series × bucket
        (trend), funnel step, retention cell, or listed user (cohort).
        """
        if self.kind == "trend":
            return _trend(self.json)
        if self.kind == "funnel" and "steps" in self.json:
            return _funnel(self.json)
        if self.kind == "retention":
            return _retention(self.json)
        if self.kind == "cohort":
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


def _trend(r: JSON) -> pd.DataFrame:
    rows = []
    for s in r.get("series", []):
        for b in s["buckets"]:
            rows.append({"series": s.get("series"), "label": s["label"], "event": s["event"], "math": s["math"],
                         "property": s.get("property"), "breakdown_value": s.get("breakdown_value"),
                         **({"period": s["period"]} if "period" in s else {}),
                         "bucket": pd.Timestamp(b["start"]), "value": b["value"], "incomplete": b["incomplete"],
                         "total": s["total"]})
    cols = ["series", "label", "event", "math", "property", "breakdown_value", "bucket", "value", "incomplete", "total"]
    return pd.DataFrame(rows, columns=cols + (["period"] if rows and "period" in rows[0] else []))


def _funnel(r: JSON) -> pd.DataFrame:
    cols = ["breakdown_value", "step", "label", "event", "users", "conversion", "conversion_from_previous", "avg_seconds", "median_seconds"]
    rows: List[JSON] = []
    groups: List[Any] = [(None, r.get("steps", []))] + [(b["value"], b["steps"]) for b in r.get("breakdown") or []]
    for value, steps in groups:
        for s in steps:
            rows.append({"breakdown_value": value, **{c: s.get(c) for c in cols[1:]}})
    return pd.DataFrame(rows, columns=cols)


def _retention(r: JSON) -> pd.DataFrame:
    cols = ["cohort_start", "breakdown_value", "size", "period", "retained", "rate", "incomplete"]
    rows = []
    for c in r.get("cohorts", []):
        for k, n in enumerate(c["retained"]):
            rows.append({"cohort_start": pd.Timestamp(c["start"]), "breakdown_value": c.get("breakdown_value"), "size": c["size"],
                         "period": k, "retained": n, "rate": c["rates"][k], "incomplete": c["incomplete"][k]})
    return pd.DataFrame(rows, columns=cols)


class Client:
    """A client of one Spur server.

    ``url`` is the server's base URL (``http://127.0.0.1:8080``); ``key``
    an API key sent as ``Authorization: Bearer KEY`` (a query key to query,
    an ingest key to send events, an admin key for both; ingest.md §4),
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
            try:
                e = resp.json().get("error", {})
            except ValueError:
                e = {}
            raise SpurError(resp.status_code, e.get("code", "internal"), e.get("message", resp.text[:200]), e.get("field", ""))
        return resp

    def apps(self) -> List[JSON]:
        """The store's apps: ``[{name, tz, events, …}]``."""
        return list(self._call("GET", "api/apps").json()["apps"])

    def schema(self, app: str) -> JSON:
        """An app's event names and property types with top values."""
        return dict(self._call("GET", f"api/apps/{app}/schema").json())

    def query(self, q: Mapping[str, Any], app: Optional[str] = None) -> Result:
        """Runs a spec §9 query (``app`` defaults to ``q["app"]``); raises SpurError."""
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
        params: Dict[str, Any] = {"offset": offset, "limit": limit}
        if tz:
            params["tz"] = tz
        body = self._call("GET", f"api/apps/{app}/users/{quote(user_id, safe='')}/events", params=params).json()
        rows = [{"time": pd.Timestamp(e["time"]), "event": e["event"], "insert_id": e.get("insert_id"), **e["properties"]} for e in body["events"]]
        return pd.DataFrame(rows)

    def send_events(self, app: str, events: Iterable[Mapping[str, Any]], batch: int = 1000) -> JSON:
        """Sends events (ingest.md §1 shape) as JSON arrays of at most
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
