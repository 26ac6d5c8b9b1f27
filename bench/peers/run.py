#!/usr/bin/env python3
"""Peer comparison: Spur beside ClickHouse (chDB) and DuckDB on the same data.

Loads one Parquet file (written by `spur gen --out`) into chDB and DuckDB,
translates every docs/analytics.md §9 query of bench/queries/*.json into SQL with the same
semantics (docs/performance.md, "Semantics of the SQL"), times each engine and
query in a fresh subprocess (one warm-up, --runs timed runs, median), checks
that every engine returns the same numbers as Spur, and writes the table to
docs/performance.md. Not run in CI; see bench/peers/README.md.

Spur's numbers come from a JSON file in the shape `spur bench --out FILE`
writes (--spur-json). When that file does not exist yet, the script imports
the Parquet (events, then one row of user properties per user) into
--spur-app under --spur-data, measures each query with `spur bench` right
before the peers run the same query, and saves the results there.
"""

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from zoneinfo import ZoneInfo

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PERCENTILES = {"median": 0.5, "p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99}


class Unsupported(Exception):
    """A query feature this script does not translate to SQL."""


# ---------------------------------------------------------------- query model


def parse_instant(s, tz):
    """A §9 range bound (date = local midnight in tz, or RFC 3339) → UTC µs."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
        d = dt.datetime.fromisoformat(s).replace(tzinfo=ZoneInfo(tz))
    else:
        d = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
        if d.tzinfo is None:
            d = d.replace(tzinfo=ZoneInfo(tz))
    return int(d.timestamp()) * 1_000_000 + d.microsecond


def parse_duration_us(s):
    """A §9 fixed-length duration ("90s", "30m", "12h", "7d", "2w", "3mo" = 90 days, "1y" = 365 days) → µs."""
    m = re.fullmatch(r"(\d+)(mo|[smhdwy])", s)
    if not m:
        raise Unsupported(f"duration {s!r}")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "mo": 30 * 86400, "y": 365 * 86400}[m.group(2)]
    return int(m.group(1)) * unit * 1_000_000


def compare_range(q):
    """The compared period of docs/analytics.md §12 for q.q["compare"]: "previous" is the
    same number of calendar days before `from` when from and to are dates,
    else the same duration; "-N<unit>" shifts both ends back (calendar units
    in the zone, months clamped to the month's end)."""
    c, r, zone = q.q["compare"], q.q["range"], ZoneInfo(q.tz)
    dates = all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", r[k]) for k in ("from", "to"))
    if c == "previous":
        if dates:
            f, t = dt.date.fromisoformat(r["from"]), dt.date.fromisoformat(r["to"])
            return parse_instant((f - (t - f)).isoformat(), q.tz), q.frm
        return q.frm - (q.to - q.frm), q.frm
    m = re.fullmatch(r"-(\d+)(mo|[smhdwy])", c)
    if not m:
        raise Unsupported(f"compare {c!r}")
    n, unit = int(m.group(1)), m.group(2)

    def shift(us):
        t = dt.datetime.fromtimestamp(us / 1e6, zone)
        if unit in ("mo", "y"):
            months = n * (12 if unit == "y" else 1)
            k = t.year * 12 + t.month - 1 - months
            y, mo = divmod(k, 12)
            last = (dt.date(y + (mo + 1) // 12, (mo + 1) % 12 + 1, 1) - dt.timedelta(days=1)).day
            t = t.replace(year=y, month=mo + 1, day=min(t.day, last))
        elif unit in ("d", "w"):
            t = (t.replace(tzinfo=None) - dt.timedelta(days=n * (7 if unit == "w" else 1))).replace(tzinfo=zone)
        else:
            return us - parse_duration_us(f"{n}{unit}")
        return int(t.timestamp()) * 1_000_000 + t.microsecond

    return shift(q.frm), shift(q.to)


def norm_label(s):
    """A bucket start from any engine → 'YYYY-MM-DDTHH:MM:SS' local time."""
    s = str(s)
    if len(s) == 10:
        return s + "T00:00:00"
    return s[:10] + "T" + s[11:19]


class Query:
    """A docs/analytics.md §9 query file; check() refuses what the SQL translation lacks."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            self.q = json.load(f)
        q = self.q
        self.kind = q["kind"]
        self.tz = q.get("tz", "UTC")
        self.frm = parse_instant(q["range"]["from"], self.tz)
        self.to = parse_instant(q["range"]["to"], self.tz)
        self.breakdown = q.get("breakdown")

    def check(self):
        if self.q.get("where"):
            raise Unsupported("global where")
        if self.breakdown and self.breakdown.get("limit"):
            raise Unsupported("breakdown limit")
        if self.kind not in ("trend", "funnel", "retention", "stickiness", "lifecycle", "paths", "attribution"):
            raise Unsupported(f"kind {self.kind}")


# ------------------------------------------------------------------ dialects


class Dialect:
    """SQL pieces that differ between ClickHouse and DuckDB."""

    def matcher(self, m):
        """An event matcher {event, where} → SQL boolean over the events table."""
        conds = [] if m.get("event", "$any") == "$any" else [f"event = {self.str(m['event'])}"]
        for f in m.get("where", []):
            conds.append(self.filter(f))
        return "(" + " AND ".join(conds) + ")" if conds else "TRUE"

    def filter(self, f):
        p, op, v = f["property"], f["op"], f.get("value")
        if p not in ("price", "session_id", "platform", "channel", "country"):
            raise Unsupported(f"filter on property {p}")
        lit = self.str if p in ("platform", "channel", "country") else repr
        ops = {"eq": "=", "neq": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
        if op in ops:
            c = f"{p} {ops[op]} {lit(v)}"
            return f"({c} OR {p} IS NULL)" if op == "neq" else c
        if op in ("in", "not_in"):
            c = f"{p} IN ({', '.join(lit(x) for x in v)})"
            return f"NOT coalesce({c}, FALSE)" if op == "not_in" else c
        if op == "is_set":
            return f"{p} IS NOT NULL"
        if op == "is_not_set":
            return f"{p} IS NULL"
        raise Unsupported(f"filter op {op}")

    @staticmethod
    def str(s):
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ClickHouse(Dialect):
    name = "chdb"

    def lead(self, x, k, part, order):
        return (f"leadInFrame({x}, {k}) OVER (PARTITION BY {part} ORDER BY {order} "
                f"ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)")

    def lag(self, x, part, order, default):
        return (f"lagInFrame({x}, 1, {default}) OVER (PARTITION BY {part} ORDER BY {order} "
                f"ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")

    def running_sum(self, x, part, order):
        return f"sum({x}) OVER (PARTITION BY {part} ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"

    def range_any(self, cond, part, order, w):
        # RANGE offsets must fit 32 bits: frames over milliseconds, exact for
        # millisecond timestamps (the generator's).
        if w % 1000 or w // 1000 >= 1 << 31:
            raise Unsupported(f"a RANGE frame of {w} µs")
        return (f"max({cond}) OVER (PARTITION BY {part} ORDER BY intDiv({order}, 1000) "
                f"RANGE BETWEEN CURRENT ROW AND {w // 1000} FOLLOWING)")

    def us(self, col="timestamp"):
        return f"toUnixTimestamp64Micro({col})"

    def median(self, x, cond):
        return f"quantileExactInclusiveIf(0.5)({x}, {cond})"

    def avg(self, x, cond):
        return f"avgIf({x}, {cond})"

    def count_if(self, cond):
        return f"countIf({cond})"

    def flag(self, cond):
        return f"toInt32({cond})"

    def count_users_if(self, cond):
        return f"uniqExactIf(user_id, {cond})"

    def ts(self, us):
        return f"fromUnixTimestamp64Micro(toInt64({us}), 'UTC')"

    def bucket(self, interval, tz, col="timestamp", week_start="monday"):
        t = self.str(tz)
        if interval == "hour":
            return f"toStartOfHour({col}, {t})"
        if interval == "day":
            return f"toDate({col}, {t})"
        if interval == "week":
            return f"toStartOfWeek({col}, {0 if week_start == 'sunday' else 1}, {t})"
        if interval == "month":
            return f"toStartOfMonth({col}, {t})"
        raise Unsupported(f"interval {interval}")

    def diff(self, interval, a, b):
        if interval == "week":
            return f"intDiv(dateDiff('day', {a}, {b}), 7)"
        return f"dateDiff('{interval}', {a}, {b})"

    def label(self, local, interval):
        """A day, week or month start (naive local datetime) as a literal comparable with bucket()."""
        return f"toDate('{local:%Y-%m-%d}')"

    def agg(self, math_, cond, prop, levels=None):
        if math_ == "count":
            return f"countIf({cond})"
        if math_ == "users":
            return f"uniqExactIf(user_id, {cond})"
        if math_ in ("sum", "avg", "min", "max"):
            return f"{math_}If({prop}, {cond})"
        if math_ == "quantiles":
            # quantileExactInclusive is R-7 = NumPy 'linear' = DuckDB quantile_cont.
            return f"quantilesExactInclusiveIf({', '.join(map(str, levels))})({prop}, {cond} AND {prop} IS NOT NULL)"
        raise Unsupported(f"math {math_}")


class DuckDB(Dialect):
    name = "duckdb"

    def lead(self, x, k, part, order):
        return f"lead({x}, {k}) OVER (PARTITION BY {part} ORDER BY {order})"

    def lag(self, x, part, order, default):
        return f"lag({x}, 1, {default}) OVER (PARTITION BY {part} ORDER BY {order})"

    def running_sum(self, x, part, order):
        return f"sum({x}) OVER (PARTITION BY {part} ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"

    def range_any(self, cond, part, order, w):
        return f"max(({cond})::INT) OVER (PARTITION BY {part} ORDER BY {order} RANGE BETWEEN CURRENT ROW AND {w} FOLLOWING)"

    def us(self, col="timestamp"):
        return f"epoch_us({col})"

    def median(self, x, cond):
        return f"quantile_cont({x}, 0.5) FILTER (WHERE {cond})"

    def avg(self, x, cond):
        return f"avg({x}) FILTER (WHERE {cond})"

    def count_if(self, cond):
        return f"count(*) FILTER (WHERE {cond})"

    def flag(self, cond):
        return f"CAST(coalesce({cond}, false) AS INTEGER)"

    def count_users_if(self, cond):
        return f"count(DISTINCT user_id) FILTER (WHERE {cond})"

    def ts(self, us):
        return f"make_timestamptz({us})"

    def bucket(self, interval, tz, col="timestamp", week_start="monday"):
        local = f"({col} AT TIME ZONE {self.str(tz)})"
        if interval == "week" and week_start == "sunday":
            return f"(date_trunc('week', {local} + INTERVAL 1 DAY) - INTERVAL 1 DAY)"
        if interval in ("hour", "day", "week", "month"):
            return f"date_trunc('{interval}', {local})"
        raise Unsupported(f"interval {interval}")

    def diff(self, interval, a, b):
        return f"date_diff('{interval}', {a}, {b})"

    def label(self, local, interval):
        """A bucket start (naive local datetime) as a literal comparable with bucket()."""
        return f"TIMESTAMP '{local:%Y-%m-%d %H:%M:%S}'"

    def agg(self, math_, cond, prop, levels=None):
        if math_ == "count":
            return f"count(*) FILTER (WHERE {cond})"
        if math_ == "users":
            return f"count(DISTINCT user_id) FILTER (WHERE {cond})"
        if math_ in ("sum", "avg", "min", "max"):
            return f"{math_}({prop}) FILTER (WHERE {cond})"
        if math_ == "quantiles":
            return f"quantile_cont({prop}, [{', '.join(map(str, levels))}]) FILTER (WHERE {cond})"
        raise Unsupported(f"math {math_}")


DIALECTS = {"chdb": ClickHouse(), "duckdb": DuckDB()}


# ---------------------------------------------------------- SQL translation


def breakdown_expr(q):
    """The breakdown value of an event row. User properties: the generator
    fixes platform/channel/country per user (checked at load), so the row's
    column is the user's current value; unset → "(none)"."""
    b = q.breakdown
    if not b:
        return None
    if b["property"] not in ("platform", "channel", "country"):
        raise Unsupported(f"breakdown by {b['property']}")
    return f"coalesce({b['property']}, '(none)')"


def cohort_sql(q, d):
    """`user_id IN (…)` for a performed-count cohort over the query range, or ''."""
    c = q.q.get("cohort")
    if not c:
        return ""
    if set(c) - {"performed", "count"} or "window" in c.get("performed", {}):
        raise Unsupported("cohort shape (only performed + count without window)")
    cnt = c.get("count", {"op": "gte", "value": 1})
    ops = {"gte": ">=", "eq": "="}
    if cnt["op"] not in ops:
        raise Unsupported(f"cohort count op {cnt['op']}")
    return (f" AND user_id IN (SELECT user_id FROM events WHERE timestamp >= {d.ts(q.frm)} "
            f"AND timestamp < {d.ts(q.to)} AND {d.matcher(c['performed'])} GROUP BY user_id "
            f"HAVING count(*) {ops[cnt['op']]} {int(cnt['value'])})")


def trend_plan(q, d):
    """SQL and a row decoder for a trend: one scan, GROUPING SETS for the
    per-bucket cells and the range total of each breakdown value."""
    interval = q.q["interval"]
    bd = breakdown_expr(q) or "NULL"
    b = d.bucket(interval, q.tz, week_start=q.q.get("week_start", "monday"))
    # decode[j] tells what result column j holds: ("s", series index) or
    # ("q", quant key) for one quantiles() call serving several series.
    aggs, decode = [], []
    quant = {}  # (where json, event, property) → (column, [(series, level)], condition, property)
    for i, s in enumerate(q.q["series"]):
        m = s.get("math", "count")
        cond = d.matcher(s)
        if m in PERCENTILES:
            key = (json.dumps(s.get("where", []), sort_keys=True), s.get("event"), s["property"])
            if key not in quant:
                quant[key] = (len(aggs), [], cond, s["property"])
                aggs.append(None)
                decode.append(("q", key))
            quant[key][1].append((i, PERCENTILES[m]))
        elif m in ("count", "users", "sum", "avg", "min", "max"):
            aggs.append(d.agg(m, cond, s.get("property")))
            decode.append(("s", i))
        else:
            raise Unsupported(f"math {m}")
    for key, (pos, members, cond, prop) in quant.items():
        aggs[pos] = d.agg("quantiles", cond, prop, [lv for _, lv in members])
    any_cond = " OR ".join(d.matcher(s) for s in q.q["series"])
    sql = (f"SELECT {bd} AS bd, {b} AS b, grouping(b) AS g, {', '.join(aggs)} FROM events "
           f"WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)} AND ({any_cond}){cohort_sql(q, d)} "
           f"GROUP BY GROUPING SETS ((bd, b), (bd))")

    def rows_to_result(rows):
        out = {}  # (series, bd) → {"buckets": {label: v}, "total": v}
        for r in rows:
            bdv, label, g = r[0], r[1], r[2]
            for j, (kind, ref) in enumerate(decode):
                v = r[3 + j]
                targets = [(ref, v)] if kind == "s" else [
                    (si, (v[k] if v is not None and len(v) > k else None))
                    for k, (si, _) in enumerate(quant[ref][1])]
                for si, val in targets:
                    cell = out.setdefault(f"{si}|{bdv}", {"buckets": {}, "total": None})
                    if isinstance(val, float) and math.isnan(val):
                        val = None
                    if g:
                        cell["total"] = val
                    else:
                        cell["buckets"][norm_label(label)] = val
        return {"kind": "trend", "series": out}

    return sql, rows_to_result


def funnel_plan_clickhouse(q, d):
    """SQL and a row decoder for a funnel with windowFunnel(W, 'strict_once'):
    users at step k = users whose level ≥ k; no time to convert."""
    steps = q.q["steps"]
    w = parse_duration_us(q.q.get("window", "14d"))
    bd = breakdown_expr(q) or "NULL"
    conds = [f"{d.matcher(steps[0])} AND timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)}"]
    conds += [d.matcher(s) for s in steps[1:]]
    sql = (f"SELECT bd, level, count() FROM (SELECT user_id, any({bd}) AS bd, "
           f"windowFunnel({w}, 'strict_once')(toUInt64(toUnixTimestamp64Micro(timestamp)), {', '.join(conds)}) AS level "
           f"FROM events WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to + w)} "
           f"AND ({' OR '.join(d.matcher(s) for s in steps)}) GROUP BY user_id) "
           f"WHERE level > 0 GROUP BY bd, level")

    def rows_to_result(rows):
        by = {}
        for bdv, level, n in rows:
            by.setdefault(bdv, [0] * len(steps))
            for k in range(level):
                by[bdv][k] += n
        groups = {}
        total = [0] * len(steps)
        for bdv, users in by.items():
            groups[str(bdv)] = [{"users": u, "avg_seconds": None, "median_seconds": None} for u in users]
            total = [a + b for a, b in zip(total, users)]
        res = {"kind": "funnel", "steps": [{"users": u, "avg_seconds": None, "median_seconds": None} for u in total]}
        if q.breakdown:
            res["breakdown"] = groups
        return res

    return sql, rows_to_result


def distinct_steps(q, what):
    """The funnel's steps, refused when two can match one event."""
    steps = q.q["steps"]
    names = [s.get("event", "$any") for s in steps]
    if "$any" in names or len(set(names)) < len(steps):
        raise Unsupported(f"{what} with steps that can match the same event")
    return steps


def duckdb_chains(q, d):
    """CTEs of the ordered funnel as chained ASOF joins: every in-range
    step-1 event starts a greedy chain (each next step = the user's earliest
    matching event at or after the previous step's time, within t1 + W):
    j{n} holds every chain (t1 … tn, NULL from the step it misses), best
    the counted one per user (longest, reaching it earliest, ties: the latest
    t1) — equal to docs/analytics.md §5 when every event matches at most one step (true
    for the bench funnels); every chain on its own is an attempt of the
    conversion-over-time view (§11: every attempt advances)."""
    steps = distinct_steps(q, "DuckDB funnel (the ASOF chain may reuse an event)")
    n = len(steps)
    w = parse_duration_us(q.q.get("window", "14d"))
    bd = breakdown_expr(q) or "NULL"
    cols = ", ".join(f"{d.matcher(s)} AS c{k + 1}" for k, s in enumerate(steps))
    parts = [f"f AS (SELECT user_id, epoch_us(timestamp) AS ts, {bd} AS bd, {cols} FROM events "
             f"WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to + w)} "
             f"AND ({' OR '.join(d.matcher(s) for s in steps)}))",
             f"j1 AS (SELECT user_id, bd, ts AS t1 FROM f WHERE c1 AND ts < {q.to})"]
    for k in range(2, n + 1):
        prev = ", ".join(f"j.t{i}" for i in range(1, k))
        parts.append(f"x{k} AS (SELECT user_id, ts FROM f WHERE c{k})")
        parts.append(f"j{k} AS (SELECT j.user_id, j.bd, {prev}, CASE WHEN x.ts <= j.t1 + {w} THEN x.ts END AS t{k} "
                     f"FROM j{k - 1} j ASOF LEFT JOIN x{k} x ON j.user_id = x.user_id AND x.ts >= j.t{k - 1})")
    level = "CASE " + " ".join(f"WHEN t{k} IS NOT NULL THEN {k}" for k in range(n, 1, -1)) + " ELSE 1 END"
    reach = "coalesce(" + ", ".join(f"t{k}" for k in range(n, 0, -1)) + ")"
    parts.append(f"lv AS (SELECT *, {level} AS level, {reach} AS tr FROM j{n})")
    parts.append("best AS (SELECT * FROM lv QUALIFY row_number() OVER "
                 "(PARTITION BY user_id ORDER BY level DESC, tr ASC, t1 DESC) = 1)")
    return parts, n


def funnel_plan_duckdb(q, d):
    """The ordered funnel's step table from duckdb_chains."""
    steps = q.q["steps"]
    parts, n = duckdb_chains(q, d)
    sel = [f"count(*) FILTER (WHERE level >= {k})" for k in range(1, n + 1)]
    for k in range(2, n + 1):
        dk = f"(t{k} - t{k - 1}) / 1e6"
        sel.append(f"avg({dk}) FILTER (WHERE level >= {k})")
        sel.append(f"quantile_cont({dk}, 0.5) FILTER (WHERE level >= {k})")
    sql = (f"WITH {', '.join(parts)} SELECT bd, grouping(bd) AS g, {', '.join(sel)} "
           f"FROM best GROUP BY GROUPING SETS ((bd), ())")

    def rows_to_result(rows):
        res = {"kind": "funnel", "steps": None}
        groups = {}
        for r in rows:
            users = list(r[2:2 + n])
            st = [{"users": users[0], "avg_seconds": None, "median_seconds": None}]
            for k in range(2, n + 1):
                a, m = r[2 + n + 2 * (k - 2)], r[2 + n + 2 * (k - 2) + 1]
                st.append({"users": users[k - 1], "avg_seconds": a, "median_seconds": m})
            if r[1]:
                res["steps"] = st
            else:
                groups[str(r[0])] = st
        if res["steps"] is None:  # no rows at all
            res["steps"] = [{"users": 0, "avg_seconds": None, "median_seconds": None} for _ in steps]
        if q.breakdown:
            res["breakdown"] = groups
        return res

    return sql, rows_to_result


def steps_result(q, rows, n):
    """Decodes (level, count, avg2, median2, …) rows grouped by level-threshold
    into the canonical step table: rows are (users≥1, …, users≥n, avg/median
    per step 2..n)."""
    r = rows[0] if rows else [0] * n + [None] * (2 * (n - 1))
    st = [{"users": r[0] or 0, "avg_seconds": None, "median_seconds": None}]
    for k in range(2, n + 1):
        st.append({"users": r[k - 1] or 0, "avg_seconds": r[n + 2 * (k - 2)], "median_seconds": r[n + 2 * (k - 2) + 1]})
    return {"kind": "funnel", "steps": st}


def funnel_strict_plan(q, d):
    """Strict order (docs/analytics.md §11) as runs over the user's events in [from, to + W]
    (every event: the bench funnels have no global filter). Each tie group
    becomes one row per distinct step it holds (0 for other events, dropped
    from a group that also holds a step: docs/analytics.md §11 ends no attempt in such a
    group); consecutive rows of one step form a run. An attempt enters at the
    last event of a run of step 1 (a step-1 event replaces the attempt) and
    reaches step k when the next runs are steps 2..k, run k starting within W
    of the entry; another run ends it. The user's level is the best attempt's
    and the counted attempt the first to reach it. Exact when each event
    matches at most one step and no tie group mixes two steps (a mixed group
    is processed as its steps in order here, where §11 also lets it advance an
    older attempt without ending the new one)."""
    steps = distinct_steps(q, "strict funnel")
    n = len(steps)
    w = parse_duration_us(q.q.get("window", "14d"))
    case = (f"CASE WHEN {d.matcher(steps[0])} AND timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)} THEN 1 "
            + " ".join(f"WHEN {d.matcher(steps[k])} THEN {k + 1}" for k in range(1, n)) + " ELSE 0 END")
    part, order = "user_id", "ts, s"
    ctes = [
        f"ev AS (SELECT user_id, {d.us()} AS ts, CAST({case} AS INTEGER) AS s FROM events "
        f"WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to + w)})",
        "g AS (SELECT user_id, ts, s, max(s) OVER (PARTITION BY user_id, ts) AS hi FROM "
        "(SELECT user_id, ts, s FROM ev GROUP BY user_id, ts, s) AS d0)",
        f"g2 AS (SELECT user_id, ts, s, {d.lag('s', part, order, -1)} AS prev FROM g WHERE s > 0 OR hi = 0)",
        f"g3 AS (SELECT user_id, ts, s, {d.running_sum('CASE WHEN s != prev THEN 1 ELSE 0 END', part, order)} AS run FROM g2)",
        "runs AS (SELECT user_id, run, min(s) AS s, min(ts) AS first, max(ts) AS last FROM g3 GROUP BY user_id, run)",
    ]
    leads = ", ".join(f"{d.lead('s', k, part, 'run')} AS s{k}, {d.lead('first', k, part, 'run')} AS f{k}"
                      for k in range(1, n))
    ctes.append(f"nx AS (SELECT user_id, run, s, last, {leads} FROM runs)")
    conds = [d.flag(f"s{k} = {k + 1} AND f{k} - last <= {w}") for k in range(1, n)]
    lvl = "1" + "".join(" + " + " * ".join(conds[:k]) for k in range(1, n))
    ctes.append(f"att AS (SELECT *, {lvl} AS lvl FROM nx WHERE s = 1)")
    ctes.append("best AS (SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY lvl DESC, run ASC) AS rn "
                "FROM att) AS b0 WHERE rn = 1)")
    times = ["last"] + [f"f{k}" for k in range(1, n)]
    sel = [d.count_if(f"lvl >= {k}") for k in range(1, n + 1)]
    for k in range(2, n + 1):
        dk = f"({times[k - 1]} - {times[k - 2]}) / 1e6"
        sel += [d.avg(dk, f"lvl >= {k}"), d.median(dk, f"lvl >= {k}")]
    sql = f"WITH {', '.join(ctes)} SELECT {', '.join(sel)} FROM best"
    return sql, lambda rows: steps_result(q, rows, n)


def funnel_unordered_plan(q, d):
    """Unordered funnel (docs/analytics.md §11): each step event in [from, to) starts a
    window [t, t + W] (a RANGE frame over the user's step events up to
    to + W; peers at t included); its value is the number of steps present —
    the maximum matching when each event matches one step; a user's level is
    the best window's. Users per step only (no times)."""
    steps = distinct_steps(q, "unordered funnel")
    n = len(steps)
    w = parse_duration_us(q.q.get("window", "14d"))
    case = "CASE " + " ".join(f"WHEN {d.matcher(s)} THEN {k + 1}" for k, s in enumerate(steps)) + " END"
    has = " + ".join(d.range_any(f"s = {k}", "user_id", "ts", w) for k in range(1, n + 1))
    sql = (f"WITH ev AS (SELECT user_id, {d.us()} AS ts, {case} AS s FROM events "
           f"WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to + w)} AND ({' OR '.join(d.matcher(s) for s in steps)})), "
           f"win AS (SELECT user_id, ts, {has} AS v FROM ev), "
           f"lv AS (SELECT user_id, max(v) AS lvl FROM win WHERE ts >= {q.frm} AND ts < {q.to} GROUP BY user_id) "
           f"SELECT {', '.join(d.count_if(f'lvl >= {k}') for k in range(1, n + 1))} FROM lv")

    def decode(rows):
        r = rows[0] if rows else [0] * n
        return {"kind": "funnel", "steps": [{"users": u or 0, "avg_seconds": None, "median_seconds": None} for u in r]}

    return sql, decode


def view_steps(q):
    n = len(q.q["steps"])
    return q.q.get("from_step", 1), q.q.get("to_step", n)


def funnel_trends_plan(q, d):
    """Conversion over time (docs/analytics.md §11): attempts bucketed by their step-1
    time; entered/converted = users with an attempt of the bucket reaching
    from_step/to_step. DuckDB: every ASOF chain is an attempt (every attempt
    advances on its own); ClickHouse: windowFunnel(W, 'strict_once'), which
    tracks every sequence, per (user, bucket) with step 1 restricted to the
    bucket."""
    interval = q.q.get("interval", "day")
    fs, ts = view_steps(q)
    if isinstance(d, DuckDB):
        parts, n = duckdb_chains(q, d)
        b = d.bucket(interval, q.tz, "make_timestamptz(t1)", q.q.get("week_start", "monday"))
        sql = (f"WITH {', '.join(parts)} SELECT {b} AS b, {d.count_users_if(f't{fs} IS NOT NULL')}, "
               f"{d.count_users_if(f't{ts} IS NOT NULL')} FROM j{n} GROUP BY b")
    else:
        steps = distinct_steps(q, "funnel trends")
        w = parse_duration_us(q.q.get("window", "14d"))
        bk = lambda col: d.bucket(interval, q.tz, col, q.q.get("week_start", "monday"))  # noqa: E731
        in_range = f"e.timestamp >= {d.ts(q.frm)} AND e.timestamp < {d.ts(q.to)}"
        conds = [f"{d.matcher(steps[0])} AND {in_range} AND {bk('e.timestamp')} = s.b"] + [d.matcher(x) for x in steps[1:]]
        sql = (f"SELECT b, countIf(level >= {fs}), countIf(level >= {ts}) FROM ("
               f"SELECT e.user_id AS u, s.b AS b, windowFunnel({w}, 'strict_once')(toUInt64(toUnixTimestamp64Micro(e.timestamp)), "
               f"{', '.join(conds)}) AS level FROM events AS e INNER JOIN (SELECT DISTINCT user_id, {bk('timestamp')} AS b FROM events "
               f"WHERE {d.matcher(steps[0])} AND timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)}) AS s ON e.user_id = s.user_id "
               f"WHERE e.timestamp >= {d.ts(q.frm)} AND e.timestamp < {d.ts(q.to + w)} "
               f"AND ({' OR '.join(d.matcher(x) for x in steps)}) GROUP BY u, b) GROUP BY b")

    def decode(rows):
        return {"kind": "funnel", "view": "trends",
                "buckets": {norm_label(b): {"entered": e, "converted": c} for b, e, c in rows}}

    return sql, decode


def histogram(durs_us, bins):
    """Spur's time-to-convert bins (docs/analytics.md §11) over durations in µs:
    lo = ⌊min⌋, hi = ⌈max⌉ seconds, bins (⌈∛u⌉ clamped to 1..60 by default),
    width ⌈(hi − lo) / bins⌉ (60 when 0), the last bin holding its end."""
    u = len(durs_us)
    if not bins:
        bins = 1
        while bins ** 3 < u:
            bins += 1
        bins = min(max(bins, 1), 60)
    if not u:
        return {"users": 0, "bins": [], "avg_seconds": None, "median_seconds": None}
    lo = min(durs_us) // 1_000_000
    hi = -(-max(durs_us) // 1_000_000)
    width = -(-(hi - lo) // bins) or 60
    counts = [0] * bins
    for x in durs_us:
        counts[min((x - lo * 1_000_000) // (width * 1_000_000), bins - 1)] += 1
    srt = sorted(durs_us)
    h = (u - 1) * 0.5
    med = srt[int(h)] + (h - int(h)) * (srt[min(int(h) + 1, u - 1)] - srt[int(h)])
    return {"users": u, "bins": [[lo + i * width, lo + (i + 1) * width, c] for i, c in enumerate(counts)],
            "avg_seconds": sum(durs_us) / u / 1e6, "median_seconds": med / 1e6}


def funnel_ttc_plan(q, d):
    """Time to convert (docs/analytics.md §11) from the counted chains of duckdb_chains:
    the users reaching to_step and their time from from_step, binned as Spur
    bins them. ClickHouse's windowFunnel has no times."""
    if not isinstance(d, DuckDB):
        raise Unsupported("time to convert (windowFunnel has no times)")
    parts, n = duckdb_chains(q, d)
    fs, ts = view_steps(q)
    sql = f"WITH {', '.join(parts)} SELECT t{ts} - t{fs} FROM best WHERE level >= {ts}"
    return sql, lambda rows: {"kind": "funnel", "view": "time_to_convert",
                              **histogram([int(r[0]) for r in rows], q.q.get("bins", 0))}


def formula_value(src, vals):
    """Evaluates a docs/analytics.md §12 formula on the series values (letters A, B, …):
    None on a division by zero or a None operand."""
    import ast

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return vals[ord(node.id.upper()) - ord("A")]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            x = ev(node.operand)
            return None if x is None else -x
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            op = type(node.op)
            if op is ast.Div:
                return None if b == 0 else a / b
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[op]
        raise Unsupported(f"formula {src!r}")

    v = ev(ast.parse(src, mode="eval"))
    return None if v is None else v + 0.0


def formulas_of(q):
    return list(q.q.get("formulas", [])) + ([q.q["formula"]] if q.q.get("formula") else [])


def trend_compare_plan(q, d):
    """A trend with formulas and/or compare (docs/analytics.md §12): the series of each
    period by trend_plan (one SQL, periods tagged), formulas evaluated on the
    decoded series per bucket and on the totals."""
    import copy
    periods = [("current", q.frm, q.to)]
    if q.q.get("compare"):
        periods.append(("previous",) + compare_range(q))
    if q.breakdown:
        raise Unsupported("formulas with a breakdown")
    sqls, decs = [], []
    for name, f, t in periods:
        qq = copy.copy(q)
        qq.frm, qq.to = f, t
        sql, dec = trend_plan(qq, d)
        sqls.append(f"SELECT '{name}' AS per, * FROM ({sql}) AS p_{name}")
        decs.append(dec)
    fs = formulas_of(q)
    nser = len(q.q["series"])

    def decode(rows):
        out = {}
        for (name, _, _), dec in zip(periods, decs):
            part = dec([r[1:] for r in rows if r[0] == name])["series"]
            for key, cell in part.items():
                out[f"{key}|{name}"] = cell
            cells = [part.get(f"{i}|None", {"buckets": {}, "total": None}) for i in range(nser)]
            labels = sorted(set().union(*(c["buckets"] for c in cells)))
            for fi, src in enumerate(fs):
                out[f"f{fi}|None|{name}"] = {
                    "buckets": {lb: formula_value(src, [c["buckets"].get(lb) or 0 for c in cells]) for lb in labels},
                    "total": formula_value(src, [c["total"] or 0 for c in cells])}
        return {"kind": "trend", "series": out}

    return " UNION ALL ".join(sqls), decode


def retention_plan(q, d):
    """First-time, calendar, `on` retention (docs/analytics.md §6): start = the user's
    earliest A event in all data; cohort = its bucket if in [from, to);
    retained at k ≥ 1 if some B event lies in bucket start+k (such an event
    is necessarily after the start)."""
    r = q.q
    if r.get("type", "first_time") != "first_time" or r.get("windows", "calendar") != "calendar" \
            or r.get("criterion", "on") != "on":
        raise Unsupported("retention other than first_time/calendar/on")
    period = r.get("period", "day")
    n = int(r.get("periods", {"hour": 24, "day": 7, "week": 4, "month": 3}[period]))
    a, b = d.matcher(r["start"]), d.matcher(r.get("return", {"event": "$any"}))
    if isinstance(d, ClickHouse):
        bk = d.bucket(period, q.tz)
        # One pass over the user-sorted table: per user the first start and
        # the set of buckets with a return event.
        sql = (f"SELECT sb, {d.diff(period, 'sb', 'rb')} AS k, count() FROM ("
               f"SELECT {d.bucket(period, q.tz, 's')} AS sb, "
               f"arrayJoin(arrayPushFront(arrayFilter(x -> x > sb AND {d.diff(period, 'sb', 'x')} < {n}, rbs), sb)) AS rb "
               f"FROM (SELECT user_id, minIf(timestamp, {a}) AS s, countIf({a}) AS na, groupUniqArrayIf({bk}, {b}) AS rbs "
               f"FROM events GROUP BY user_id) "
               f"WHERE na > 0 AND s >= {d.ts(q.frm)} AND s < {d.ts(q.to)}) GROUP BY sb, k")
    else:
        sql = (f"WITH st AS (SELECT user_id, min(timestamp) AS s FROM events WHERE {a} GROUP BY user_id), "
               f"coh AS (SELECT user_id, {d.bucket(period, q.tz, 's')} AS sb FROM st "
               f"WHERE s >= {d.ts(q.frm)} AND s < {d.ts(q.to)}), "
               f"ret AS (SELECT DISTINCT user_id, {d.bucket(period, q.tz)} AS rb FROM events "
               f"WHERE {b} AND timestamp >= {d.ts(q.frm)}) "
               f"SELECT sb, {d.diff(period, 'sb', 'rb')} AS k, count(*) FROM coh JOIN ret USING (user_id) "
               f"WHERE rb > sb AND {d.diff(period, 'sb', 'rb')} < {n} GROUP BY ALL "
               f"UNION ALL SELECT sb, 0, count(*) FROM coh GROUP BY sb")

    def rows_to_result(rows):
        cohorts = {}
        for sb, k, c in rows:
            cohorts.setdefault(norm_label(sb), [0] * n)[int(k)] = c
        return {"kind": "retention", "periods": n,
                "cohorts": {lbl: {"size": v[0], "retained": v} for lbl, v in sorted(cohorts.items())}}

    return sql, rows_to_result



# ------------------------------------------- stickiness, lifecycle, paths, attribution


def local_floor(us, interval, tz, week_start="monday"):
    """The local start (naive datetime) and UTC µs of the calendar bucket
    holding instant us (docs/analytics.md §2; day, week and month)."""
    zone = ZoneInfo(tz)
    t = dt.datetime.fromtimestamp(us / 1e6, zone).replace(tzinfo=None)
    d = dt.datetime(t.year, t.month, t.day)
    if interval == "week":
        wd = (d.weekday() + (1 if week_start == "sunday" else 0)) % 7
        d -= dt.timedelta(days=wd)
    elif interval == "month":
        d = d.replace(day=1)
    elif interval != "day":
        raise Unsupported(f"interval {interval}")
    return d, int(d.replace(tzinfo=zone).timestamp()) * 1_000_000


def prev_bucket(local, interval):
    if interval == "month":
        return (local.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    return local - dt.timedelta(days=7 if interval == "week" else 1)


def step_sql(interval):
    return {"day": "INTERVAL 1 DAY", "week": "INTERVAL 7 DAY", "month": "INTERVAL 1 MONTH"}[interval]


def plain_matcher(m, what):
    """An event name matcher without filters (the translations below take no others)."""
    if set(m) - {"event"} or m.get("event", "$any") == "$any":
        raise Unsupported(f"{what}: only a plain event name")
    return m["event"]


def stickiness_plan(q, d):
    """Per user, the buckets holding at least min_events matching events in
    [from, to); users per number of such buckets (docs/analytics.md §13)."""
    r = q.q
    if q.breakdown or r.get("cumulative") or len(r["series"]) != 1 or r.get("series")[0].get("math"):
        raise Unsupported("stickiness other than one series without breakdown or cumulative")
    b = d.bucket(r.get("interval", "day"), q.tz, week_start=r.get("week_start", "monday"))
    cnt = "count()" if isinstance(d, ClickHouse) else "count(*)"
    sql = (f"SELECT n, {cnt} FROM (SELECT user_id, sum(CASE WHEN c >= {int(r.get('min_events', 1))} THEN 1 ELSE 0 END) AS n FROM ("
           f"SELECT user_id, {b} AS b, {cnt} AS c FROM events WHERE timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)} "
           f"AND {d.matcher(r['series'][0])} GROUP BY user_id, b) GROUP BY user_id) WHERE n > 0 GROUP BY n")

    def rows_to_result(rows):
        return {"kind": "stickiness", "counts": {str(int(n)): int(c) for n, c in rows}}

    return sql, rows_to_result


def lifecycle_plan(q, d):
    """docs/analytics.md §14: per user the first event of any kind (before `to`) and the
    buckets with a matching event (in [from, to), or anywhere in the bucket
    before the range); new / returning / resurrecting per active bucket of
    the range, dormant in the bucket after an active one when it is not."""
    r = q.q
    if q.breakdown:
        raise Unsupported("lifecycle breakdown")
    iv, ws = r.get("interval", "day"), r.get("week_start", "monday")
    ev = r["event"] if isinstance(r["event"], dict) else {"event": r["event"]}
    first_local, first_us = local_floor(q.frm, iv, q.tz, ws)
    hist_local = prev_bucket(first_local, iv)
    hist_us = int(hist_local.replace(tzinfo=ZoneInfo(q.tz)).timestamp()) * 1_000_000
    end_local = dt.datetime.fromtimestamp(q.to / 1e6, ZoneInfo(q.tz)).replace(tzinfo=None)
    step = step_sql(iv)
    bk = d.bucket(iv, q.tz, week_start=ws)
    act = (f"{d.matcher(ev)} AND ((timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)}) "
           f"OR (timestamp >= {d.ts(hist_us)} AND timestamp < {d.ts(first_us)}))")
    if isinstance(d, ClickHouse):
        end = f"toDateTime('{end_local:%Y-%m-%d %H:%M:%S}', {d.str(q.tz)})"
        sql = (f"SELECT t.1 AS b, t.2 AS s, count() FROM (SELECT arrayJoin(arrayConcat("
               f"arrayMap(x -> (x, multiIf(x = {d.bucket(iv, q.tz, 'first', ws)}, 0, has(bs, x - {step}), 1, 2)), "
               f"arrayFilter(x -> x >= {d.label(first_local, iv)}, bs)), "
               f"arrayMap(x -> (x + {step}, 3), arrayFilter(x -> NOT has(bs, x + {step}) AND toDateTime(x + {step}, {d.str(q.tz)}) < {end}, bs)))) AS t "
               f"FROM (SELECT user_id, min(timestamp) AS first, groupUniqArrayIf({bk}, {act}) AS bs FROM events "
               f"WHERE timestamp < {d.ts(q.to)} GROUP BY user_id)) GROUP BY b, s")
    else:
        end = f"TIMESTAMP '{end_local:%Y-%m-%d %H:%M:%S.%f}'"
        sql = (f"WITH fs AS (SELECT user_id, min(timestamp) AS first FROM events WHERE timestamp < {d.ts(q.to)} GROUP BY user_id), "
               f"act AS (SELECT DISTINCT user_id, {bk} AS b FROM events WHERE {act}), "
               f"st AS (SELECT a.b, CASE WHEN a.b = {d.bucket(iv, q.tz, 'fs.first', ws)} THEN 0 WHEN p.user_id IS NOT NULL THEN 1 ELSE 2 END AS s "
               f"FROM act a JOIN fs USING (user_id) LEFT JOIN act p ON p.user_id = a.user_id AND p.b = a.b - {step} "
               f"WHERE a.b >= {d.label(first_local, iv)}) "
               f"SELECT b, s, count(*) FROM st GROUP BY ALL UNION ALL "
               f"SELECT a.b + {step}, 3, count(*) FROM act a LEFT JOIN act n ON n.user_id = a.user_id AND n.b = a.b + {step} "
               f"WHERE n.user_id IS NULL AND a.b + {step} < {end} GROUP BY ALL")

    def rows_to_result(rows):
        out = {}
        for b, st, c in rows:
            out.setdefault(norm_label(b), [0, 0, 0, 0])[int(st)] += int(c)
        return {"kind": "lifecycle", "buckets": out}

    return sql, rows_to_result


def path_edges(edges, min_sessions, max_edges):
    """docs/analytics.md §15's selection of the edges of a result (as Spur's pathEdges):
    at least min_sessions, the max_edges heaviest (ties: source, target,
    byte-wise), those reachable from a position-1 node."""
    es = sorted((e for e in edges if e[2] >= min_sessions),
                key=lambda e: (-e[2], e[0].encode(), e[1].encode()))[:max_edges]
    reached = set()
    for e in sorted(es, key=lambda e: int(e[0].split("_", 1)[0])):
        if e[0].startswith("1_") or e[0] in reached:
            reached.update((e[0], e[1]))
    return {f"{e[0]}>{e[1]}": [e[2], e[3], e[4]] for e in es if e[0] in reached}


def paths_plan(q, d):
    """docs/analytics.md §15 for paths of event names from a start event: per user the
    range's events in time order, cut into sessions at gaps ≥ session_gap,
    runs of one event collapsed into their last, each session's path from
    its first start event, `steps` long; edges counted per position. The
    selection of the edges (min_sessions, max_edges, reachability) is done
    on the rows, as Spur does after its scan."""
    r = q.q
    if r.get("events", "$any") != "$any" or r.get("item_property") or r.get("exclude") or r.get("end") or "start" not in r:
        raise Unsupported("paths other than $any events from a start event")
    start = plain_matcher(r["start"], "start")
    steps = int(r.get("steps", 5))
    gap = parse_duration_us(r.get("session_gap", "30m"))
    rng = f"timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)}"
    if isinstance(d, ClickHouse):
        sql = (f"SELECT e.1 AS pos, e.2 AS src, e.3 AS dst, count() AS sessions, uniqExact(user_id) AS users, sum(e.4) AS us FROM ("
               f"SELECT user_id, arrayJoin(arrayMap(i -> (i, p[i].2, p[i + 1].2, p[i + 1].1 - p[i].1), range(1, length(p)))) AS e FROM ("
               f"SELECT user_id, arraySlice(c, indexOf(arrayMap(x -> x.2, c), {d.str(start)}), {steps}) AS p, "
               f"indexOf(arrayMap(x -> x.2, c), {d.str(start)}) AS k FROM ("
               f"SELECT user_id, arrayFilter((x, i) -> i = length(s) OR s[i + 1].2 != x.2, s, arrayEnumerate(s)) AS c FROM ("
               f"SELECT user_id, arraySort(x -> x.1, groupArray((toUnixTimestamp64Micro(timestamp), toString(event)))) AS evs "
               f"FROM events WHERE {rng} GROUP BY user_id) "
               f"ARRAY JOIN arraySplit((x, i) -> i > 1 AND x.1 - evs[i - 1].1 >= {gap}, evs, arrayEnumerate(evs)) AS s) WHERE k > 0)) "
               f"GROUP BY pos, src, dst")
    else:
        sql = (f"WITH e AS (SELECT user_id, epoch_us(timestamp) AS ts, event AS item FROM events WHERE {rng}), "
               f"w1 AS (SELECT *, lag(ts) OVER w AS pts, lead(ts) OVER w AS nts, lead(item) OVER w AS nitem FROM e "
               f"WINDOW w AS (PARTITION BY user_id ORDER BY ts)), "
               f"w2 AS (SELECT user_id, ts, item, (nts IS NULL OR nts - ts >= {gap} OR nitem != item) AS keep, "
               f"sum(CASE WHEN pts IS NULL OR ts - pts >= {gap} THEN 1 ELSE 0 END) OVER (PARTITION BY user_id ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sess FROM w1), "
               f"k AS (SELECT user_id, sess, ts, item, row_number() OVER (PARTITION BY user_id, sess ORDER BY ts) AS p0 FROM w2 WHERE keep), "
               f"st AS (SELECT *, min(CASE WHEN item = {d.str(start)} THEN p0 END) OVER (PARTITION BY user_id, sess) AS sp FROM k), "
               f"p AS (SELECT user_id, sess, ts, item, p0 - sp + 1 AS pos FROM st WHERE p0 >= sp AND p0 < sp + {steps}), "
               f"ed AS (SELECT user_id, pos, item, lead(item) OVER w AS nitem, lead(ts) OVER w - ts AS dt FROM p "
               f"WINDOW w AS (PARTITION BY user_id, sess ORDER BY pos)) "
               f"SELECT pos, item, nitem, count(*), count(DISTINCT user_id), sum(dt) FROM ed WHERE nitem IS NOT NULL GROUP BY ALL")

    def rows_to_result(rows):
        edges = [(f"{int(pos)}_{a}", f"{int(pos) + 1}_{b}", int(n), int(u), int(us) / int(n) / 1e6) for pos, a, b, n, u, us in rows]
        return {"kind": "paths", "edges": path_edges(edges, int(r.get("min_sessions", 0)), int(r.get("max_edges", 50)))}

    return sql, rows_to_result


def attribution_plan(q, d):
    """docs/analytics.md §10 for all conversions of one event, touchpoints of plain
    event names (that match no other matcher) with their lookbacks,
    last_touch (ASOF joins: the latest touchpoint of each matcher at or
    before the conversion, the first matcher's if within its lookback, else
    the next's) or time_decay (every eligible touchpoint weighted
    2^(−age/half-life), normalised per conversion), and subsequent events
    inheriting the shares of the user's latest conversion within the
    window (an ASOF join)."""
    r = q.q
    model = r.get("model", "last_touch")
    if q.breakdown or r.get("interval") or r.get("conversions", "all") != "all" or r.get("value") \
            or model not in ("last_touch", "time_decay") or r.get("channel") != "channel":
        raise Unsupported("attribution other than last_touch/time_decay of all conversions by channel, without value, interval or breakdown")
    conv = plain_matcher(r["conversion"], "conversion")
    tps = [(plain_matcher({k: v for k, v in t.items() if k != "lookback"}, "touchpoint"), parse_duration_us(t["lookback"]))
           for t in r["touchpoints"]]
    if len({n for n, _ in tps} | {conv}) != len(tps) + 1:
        raise Unsupported("touchpoints matching the same events")
    sub = r.get("subsequent")
    win = parse_duration_us(sub["window"]) if sub else 0
    conv_from = q.frm - win
    look = max(lb for _, lb in tps)
    ch = isinstance(d, ClickHouse)
    us = (lambda c: f"toUnixTimestamp64Micro({c})") if ch else (lambda c: f"epoch_us({c})")
    parts = [f"conv AS (SELECT user_id, {us('timestamp')} AS t FROM events WHERE event = {d.str(conv)} "
             f"AND timestamp >= {d.ts(conv_from)} AND timestamp < {d.ts(q.to)})"]
    for i, (name, lb) in enumerate(tps):
        parts.append(f"tp{i} AS (SELECT user_id, {us('timestamp')} AS tt, channel, {lb} AS lb FROM events WHERE event = {d.str(name)} "
                     f"AND timestamp >= {d.ts(conv_from - lb)} AND timestamp < {d.ts(q.to)})")
    if model == "last_touch":
        joins = " ".join(f"ASOF LEFT JOIN tp{i} k{i} ON c.user_id = k{i}.user_id AND c.t >= k{i}.tt" for i in range(len(tps)))
        case = " ".join(f"WHEN c.t - k{i}.tt <= {lb} THEN k{i}.channel" for i, (_, lb) in enumerate(tps))
        parts.append(f"sh AS (SELECT c.user_id AS user_id, c.t AS t, CASE {case} ELSE '(unattributed)' END AS ch, 1.0 AS share FROM conv c {joins})")
    else:
        h = parse_duration_us(r.get("half_life", "7d"))
        union = " UNION ALL ".join(f"SELECT * FROM tp{i}" for i in range(len(tps)))
        parts += [
            f"el AS (SELECT c.user_id AS user_id, c.t AS t, k.channel AS channel, k.tt AS tt FROM conv c JOIN ({union}) k ON c.user_id = k.user_id "
            f"WHERE k.tt <= c.t AND c.t - k.tt <= k.lb)",
            f"wd AS (SELECT user_id, t, channel, {'exp2(' if ch else 'pow(2.0, '}(tt - max(tt) OVER (PARTITION BY user_id, t)) / {h}) AS wgt FROM el)",
            f"wt AS (SELECT user_id, t, channel, wgt, sum(wgt) OVER (PARTITION BY user_id, t) AS tot FROM wd)",
            f"sh AS (SELECT user_id, t, channel AS ch, sum(wgt / tot) AS share FROM wt GROUP BY user_id, t, channel "
            f"UNION ALL SELECT c.user_id AS user_id, c.t AS t, '(unattributed)', 1.0 FROM conv c LEFT JOIN (SELECT DISTINCT user_id, t FROM el) e2 "
            f"ON e2.user_id = c.user_id AND e2.t = c.t WHERE e2.user_id IS NULL)",
        ]
    cnt = "count()" if ch else "count(*)"
    uniq = "uniqExactIf(user_id, share > 0)" if ch else "count(DISTINCT user_id) FILTER (WHERE share > 0)"
    sel = [f"SELECT ch, 0 AS k, sum(share) AS a, {uniq} AS b FROM sh WHERE t >= {q.frm} GROUP BY ch",
           f"SELECT '', 1, {cnt}, {'uniqExact(user_id)' if ch else 'count(DISTINCT user_id)'} FROM conv WHERE t >= {q.frm}"]
    if sub:
        sname = plain_matcher({"event": sub["event"]}, "subsequent")
        val = f"coalesce({sub['value']}, 0)" if sub.get("value") else "0"
        if sub.get("value") not in (None, "revenue", "price"):
            raise Unsupported(f"subsequent value {sub.get('value')}")
        parts += [
            f"pu AS (SELECT user_id, {us('timestamp')} AS s, {val} AS v FROM events WHERE event = {d.str(sname)} "
            f"AND timestamp >= {d.ts(q.frm)} AND timestamp < {d.ts(q.to)})",
            f"pc AS (SELECT p.user_id AS user_id, p.s AS s, p.v AS v, CASE WHEN p.s - c.t <= {win} THEN c.t END AS ct FROM pu p "
            f"ASOF LEFT JOIN conv c ON p.user_id = c.user_id AND p.s >= c.t)",
            f"ps AS (SELECT pc.v, coalesce(sh.ch, '(unattributed)') AS ch, coalesce(sh.share, 1.0) AS share FROM pc "
            f"LEFT JOIN sh ON sh.user_id = pc.user_id AND sh.t = pc.ct)",
        ]
        sel += [f"SELECT ch, 2, sum(share), sum(share * v) FROM ps GROUP BY ch",
                f"SELECT '', 3, {cnt}, sum(v) FROM pu"]
    sql = f"WITH {', '.join(parts)} " + " UNION ALL ".join(sel)
    if ch:
        sql += " SETTINGS join_use_nulls = 1"

    def rows_to_result(rows):
        out = {"kind": "attribution", "total": {}, "channels": {}}
        for chv, k, a, b in rows:
            k = int(k)
            if k == 1:
                out["total"].update(conversions=int(a), users=int(b))
            elif k == 3:
                out["total"].update(sub_events=int(a), sub_value=float(b or 0))
            else:
                c = out["channels"].setdefault(chv, {"conversions": 0.0, "users": 0, "sub_events": 0.0, "sub_value": 0.0})
                if k == 0:
                    c.update(conversions=float(a), users=int(b))
                else:
                    c.update(sub_events=float(a), sub_value=float(b or 0))
        return out

    return sql, rows_to_result


def plan(q, engine):
    """(SQL, decoder of its rows into the canonical result) for one engine;
    raises Unsupported for what the translation does not cover."""
    q.check()
    d = DIALECTS[engine]
    if q.kind == "trend":
        if q.q.get("compare") or formulas_of(q):
            return trend_compare_plan(q, d)
        return trend_plan(q, d)
    if q.kind == "funnel":
        if q.q.get("exclusions"):
            raise Unsupported("funnel exclusions (windowFunnel has none; an exact SQL form of docs/analytics.md §11's rule is not written)")
        order, view = q.q.get("order", "ordered"), q.q.get("view", "steps")
        if order != "ordered" and view != "steps":
            raise Unsupported(f"{order} funnel in the {view} view")
        if order == "strict":
            return funnel_strict_plan(q, d)
        if order == "unordered":
            return funnel_unordered_plan(q, d)
        if view == "trends":
            return funnel_trends_plan(q, d)
        if view == "time_to_convert":
            return funnel_ttc_plan(q, d)
        return (funnel_plan_clickhouse if engine == "chdb" else funnel_plan_duckdb)(q, d)
    if q.kind in ("stickiness", "lifecycle", "paths", "attribution"):
        return globals()[q.kind + "_plan"](q, d)
    return retention_plan(q, d)


# ---------------------------------------------------------------- engines


class ChdbEngine:
    def __init__(self, path):
        from chdb import session
        self.s = session.Session(path)

    def rows(self, sql):
        r = self.s.query(sql, "JSONCompact")
        return json.loads(r.bytes() or b'{"data": []}')["data"]

    def close(self):
        self.s.close()


class DuckdbEngine:
    def __init__(self, path):
        import duckdb
        self.c = duckdb.connect(path, read_only=True)
        self.c.execute("SET TimeZone = 'UTC'")
        self.c.execute("SET enable_progress_bar = false")

    def rows(self, sql):
        return self.c.execute(sql).fetchall()

    def close(self):
        self.c.close()


def open_engine(engine, path):
    return ChdbEngine(path) if engine == "chdb" else DuckdbEngine(path)


def to_jsonable(v):
    """Dates and tuples from the engines' rows → JSON values."""
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [to_jsonable(x) for x in v]
    return v


def worker(args):
    """Runs in a fresh process: open the engine's database, warm up, time
    --runs runs, print JSON with the runs, the result and this process's
    peak RSS (VmHWM)."""
    eng = open_engine(args.engine, args.db)
    out = {"engine": args.engine}
    if args.query:
        q = Query(args.query)
        try:
            sql, decode = plan(q, args.engine)
        except Unsupported as e:
            json.dump({"engine": args.engine, "unsupported": str(e)}, sys.stdout)
            return
        rows = eng.rows(sql)  # warm-up
        runs = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            rows = eng.rows(sql)
            runs.append((time.perf_counter() - t0) * 1000)
        out.update(sql=sql, runs_ms=runs, median_ms=statistics.median(runs),
                   result=decode([to_jsonable(list(r)) for r in rows]))
    else:
        out["version"] = str(eng.rows("SELECT version()")[0][0])
    out["peak_rss_bytes"] = vm_hwm()
    out["loadavg"] = os.getloadavg()
    eng.close()
    json.dump(out, sys.stdout)


def run_worker(engine, db, query, runs):
    """Runs `run.py worker` in a fresh process and returns its JSON (or {"error"})."""
    cmd = [sys.executable, os.path.abspath(__file__), "worker", "--engine", engine, "--db", db, "--runs", str(runs)]
    if query:
        cmd += ["--query", query]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout)


# ------------------------------------------------------------------ loading


def load_chdb(parquet, path):
    """Creates the MergeTree table at path, loads the Parquet (timed), merges it
    to one part (timed separately) and returns sizes and timings."""
    from chdb import session
    s = session.Session(path)
    q = lambda sql: s.query(sql, "JSONCompact")  # noqa: E731
    q("DROP TABLE IF EXISTS events SYNC")
    q("CREATE TABLE events (user_id String, timestamp DateTime64(6, 'UTC'), event LowCardinality(String), "
      "session_id Int64, price Nullable(Float64), platform LowCardinality(String), "
      "channel LowCardinality(String), country LowCardinality(String), revenue Nullable(Float64), "
      "url LowCardinality(Nullable(String))) "
      "ENGINE = MergeTree ORDER BY (user_id, timestamp)")
    t0 = time.perf_counter()
    q(f"INSERT INTO events SELECT * FROM file('{os.path.abspath(parquet)}', Parquet)")
    insert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    q("OPTIMIZE TABLE events FINAL")
    optimize_s = time.perf_counter() - t0
    data = json.loads(q("SELECT count(), sum(rows) FROM system.parts WHERE table = 'events' AND active").bytes())
    parts = data["data"][0][0]
    b = json.loads(q("SELECT sum(bytes_on_disk) FROM system.parts WHERE table = 'events' AND active").bytes())
    n, last = json.loads(q("SELECT count(), toUnixTimestamp64Micro(max(timestamp)) FROM events").bytes())["data"][0]
    varying = json.loads(q("SELECT count() FROM (SELECT user_id FROM events WHERE event NOT IN ('ad_impression', 'ad_click') "
                           "GROUP BY user_id HAVING uniqExact(platform) > 1 OR uniqExact(channel) > 1 OR uniqExact(country) > 1)").bytes())
    s.close()
    return {"events": int(n), "data_end_us": int(last) + 1, "insert_s": insert_s, "optimize_s": optimize_s, "parts": int(parts),
            "bytes_on_disk": int(b["data"][0][0]), "users_with_varying_props": int(varying["data"][0][0])}


def load_duckdb(parquet, path):
    """Creates the database file at path with the events sorted by (user_id,
    timestamp), checkpoints it (timed together) and returns size and timing."""
    import duckdb
    for p in (path, path + ".wal"):
        if os.path.exists(p):
            os.remove(p)
    c = duckdb.connect(path)
    c.execute("SET enable_progress_bar = false")
    t0 = time.perf_counter()
    c.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{os.path.abspath(parquet)}') ORDER BY user_id, timestamp")
    c.execute("CHECKPOINT")
    s = time.perf_counter() - t0
    n, last = c.execute("SELECT count(*), epoch_us(max(timestamp)) FROM events").fetchone()
    c.close()
    size = os.path.getsize(path) + (os.path.getsize(path + ".wal") if os.path.exists(path + ".wal") else 0)
    return {"events": int(n), "insert_s": s, "bytes_on_disk": size, "data_end_us": int(last) + 1}


# --------------------------------------------------------------------- Spur


def vm_hwm(pid="self"):
    """A process's peak RSS in bytes (VmHWM of /proc/PID/status), or 0.

    Unlike getrusage/wait4 ru_maxrss this is per address space: on Linux a
    child's ru_maxrss also counts its parent's RSS at fork/vfork time, which
    would charge the runner's own memory to the engine."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_measured(cmd):
    """Runs cmd; returns (exit code, stdout, stderr, its peak RSS in bytes,
    polled from VmHWM every 5 ms — VmHWM only grows, so the last reading
    before exit is the peak unless it was reached in the last 5 ms)."""
    import tempfile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe)
        peak = 0
        while p.poll() is None:
            peak = max(peak, vm_hwm(p.pid))
            time.sleep(0.005)
        fo.seek(0)
        fe.seek(0)
        return p.returncode, fo.read().decode(), fe.read().decode(), peak


def spur_prepare(a, base):
    """Makes sure the Spur app holds the Parquet's events (timed `spur
    import`) and the users' properties (platform, channel, country, from a
    CSV exported by DuckDB; without them a user-property breakdown has
    nothing to group by). Returns the import measurement or None."""
    if subprocess.run(base + ["inspect", "--app", a.spur_app, "--json"], capture_output=True).returncode == 0:
        return None
    t0 = time.perf_counter()
    subprocess.run(base + ["import", "--no-compact", "--app", a.spur_app, a.parquet], check=True, capture_output=True)
    secs = time.perf_counter() - t0
    # Compaction (what `spur import` runs by itself after a large import) is
    # timed on its own, so the import rate is the import's.
    t0 = time.perf_counter()
    subprocess.run(base + ["compact", "--app", a.spur_app], check=True, capture_output=True)
    compact_secs = time.perf_counter() - t0
    users_csv = os.path.join(a.work, os.path.splitext(os.path.basename(a.parquet))[0] + ".users.csv")
    subprocess.run([sys.executable, os.path.abspath(__file__), "users", "--parquet", a.parquet, "--csv", users_csv],
                   check=True)
    t1 = time.perf_counter()
    subprocess.run(base + ["import", "--app", a.spur_app, "--users", users_csv], check=True, capture_output=True)
    return {"events_per_s": None, "seconds": secs, "source": "parquet", "compact_seconds": compact_secs,
            "users_seconds": time.perf_counter() - t1}


def export_users(parquet, csv):
    """Writes user_id, platform, channel, country (one row per user) as CSV."""
    import duckdb
    c = duckdb.connect()
    c.execute("SET enable_progress_bar = false")
    # An ad touchpoint carries the ad's channel: the user's is on the other events.
    c.execute(f"COPY (SELECT user_id, any_value(platform) AS platform, any_value(channel) AS channel, "
              f"any_value(country) AS country FROM read_parquet('{os.path.abspath(parquet)}') "
              f"WHERE event NOT IN ('ad_impression', 'ad_click') "
              f"GROUP BY user_id ORDER BY user_id) TO '{csv}' (HEADER, DELIMITER ',')")
    c.close()


class SpurSide:
    """Spur's report and per-query results. With an existing --spur-json
    (the `spur bench --out` shape) everything is read from it. Otherwise the
    app is prepared (spur_prepare) and each query is measured by measure(),
    called by main between the peers' runs of the same query so that all three
    engines see about the same machine load: `spur bench` on a directory
    holding only that query, or, with a binary that has no `bench`, `spur
    query` once to warm up and --runs times (time = the result's
    stats.wall_ms, memory = the child's VmHWM). save() writes the collected
    results to --spur-json in the `spur bench` shape."""

    def __init__(self, a):
        self.a = a
        self.base = [a.spur_bin, "--data", a.spur_data]
        self.out = a.spur_json or os.path.join(
            a.work, os.path.splitext(os.path.basename(a.parquet))[0] + ".spur.json")
        old_import = None
        if os.path.exists(self.out):
            with open(self.out) as f:
                self.rep = json.load(f)
            if not a.remeasure_spur:
                print(f"using the Spur results in {self.out} (--remeasure-spur to measure again)", file=sys.stderr)
                self.measured = {r["name"]: r for r in self.rep["queries"]}
                self.fresh = False
                return
            old_import = self.rep.get("import")
        self.fresh = True
        imp = spur_prepare(a, self.base) or old_import
        info = json.loads(subprocess.run(self.base + ["inspect", "--app", a.spur_app, "--json"],
                                         capture_output=True, text=True, check=True).stdout)
        self.rep = {"app": a.spur_app, "events": info["events"], "users": info.get("users"),
                    "bytes_on_disk": info["bytes"], "queries": []}
        if imp:
            imp["events_per_s"] = info["events"] / imp["seconds"]
            self.rep["import"] = imp  # kept across --remeasure-spur: the app is only imported once
        self.has_bench = subprocess.run(self.base + ["bench", "--help"], capture_output=True).returncode == 0
        self.measured = {}

    def result(self, q):
        if q.name not in self.measured and self.fresh:
            self.measured[q.name] = self.bench(q) if self.has_bench else self.query_loop(q)
            self.rep["queries"].append(self.measured[q.name])
        r = self.measured.get(q.name, {"supported": False, "error": "missing from Spur results"})
        r.setdefault("supported", not r.get("error"))
        return r

    def bench(self, q):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.symlink(os.path.abspath(q.path), os.path.join(d, os.path.basename(q.path)))
            out = os.path.join(d, "spur.json")
            subprocess.run(self.base + ["bench", "--app", self.a.spur_app, "--queries", d,
                                        "--runs", str(self.a.runs), "--out", out],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                r = json.load(f)["queries"][0]
        r["file"] = os.path.relpath(q.path, REPO)
        return r

    def query_loop(self, q):
        r = {"name": q.name, "file": os.path.relpath(q.path, REPO), "supported": True, "error": "", "runs_ms": []}
        peak = 0
        for i in range(self.a.runs + 1):
            code, out, err, rss = run_measured(self.base + ["query", "--app", self.a.spur_app, q.path])
            peak = max(peak, rss)
            if code != 0:
                r["supported"], r["error"] = False, (err.strip().splitlines() or ["?"])[-1].removeprefix("Error: ")
                return r
            res = json.loads(out)
            if i > 0:
                r["runs_ms"].append(res["stats"]["wall_ms"])
            r["result"] = res
        r["median_ms"] = statistics.median(r["runs_ms"])
        r["peak_rss_bytes"] = peak
        r["events_scanned"] = r["result"]["stats"].get("events_scanned")
        return r

    def save(self):
        if self.fresh:
            with open(self.out, "w") as f:
                json.dump(self.rep, f, indent=1)


def spur_canonical(q, res):
    """Spur's §9 result → the same canonical shape the SQL decoders produce."""
    if q.kind == "trend":
        out = {}
        tagged = bool(q.q.get("compare") or formulas_of(q))
        seen = {}
        for e in res["series"]:
            idxs = [i for i, s in enumerate(q.q["series"])
                    if s.get("event") == e.get("event") and s.get("math", "count") == e.get("math")
                    and ("property" not in e or e["property"] == s.get("property"))]
            bdv = e.get("breakdown_value")
            per = f"|{e.get('period') or 'current'}" if tagged else ""
            # Series repeated in the query: the k-th row of a (label, value, period) is the k-th of them.
            k = seen.get((tuple(idxs), bdv, per), 0)
            seen[(tuple(idxs), bdv, per)] = k + 1
            out[f"{idxs[min(k, len(idxs) - 1)]}|{bdv}{per}"] = {
                "buckets": {norm_label(b["start"]): b["value"] for b in e["buckets"]}, "total": e.get("total")}
        fs = formulas_of(q)
        for f in res.get("formulas") or []:
            out[f"f{fs.index(f['formula'])}|{f.get('breakdown_value')}|{f.get('period') or 'current'}"] = {
                "buckets": {norm_label(b["start"]): b["value"] for b in f["buckets"]}, "total": f.get("total")}
        return {"kind": "trend", "series": out}
    if q.kind == "funnel" and q.q.get("view") == "trends":
        return {"kind": "funnel", "view": "trends",
                "buckets": {norm_label(b["start"]): {"entered": b["entered"], "converted": b["converted"]}
                            for b in res["buckets"] if b["entered"] or b["converted"]}}
    if q.kind == "funnel" and q.q.get("view") == "time_to_convert":
        return {"kind": "funnel", "view": "time_to_convert", "users": res["users"],
                "bins": [[b["from_seconds"], b["to_seconds"], b["users"]] for b in res["histogram"]],
                "avg_seconds": res.get("average_seconds"), "median_seconds": res.get("median_seconds")}
    if q.kind == "funnel":
        st = lambda steps: [{k: s.get(k) for k in ("users", "avg_seconds", "median_seconds")} for s in steps]  # noqa
        out = {"kind": "funnel", "steps": st(res["steps"])}
        if q.breakdown:
            out["breakdown"] = {str(b["value"]): st(b["steps"]) for b in res.get("breakdown") or []}
        return out
    if q.kind == "stickiness":
        return {"kind": "stickiness", "counts": {str(i + 1): c for i, c in enumerate(res["series"][0]["counts"]) if c}}
    if q.kind == "lifecycle":
        out = {}
        for b in res["buckets"]:
            v = [b["new"], b["returning"], b["resurrecting"], -b["dormant"]]
            if any(v):
                out[norm_label(b["start"])] = v
        return {"kind": "lifecycle", "buckets": out}
    if q.kind == "paths":
        return {"kind": "paths", "edges": {f"{e['source']}>{e['target']}": [e["sessions"], e["users"], e["avg_seconds"]]
                                           for e in res["edges"]}}
    if q.kind == "attribution":
        t = res["total"]
        tot = {"conversions": t["conversions"], "users": t["users"]}
        if t.get("subsequent"):
            tot.update(sub_events=t["subsequent"]["events"], sub_value=t["subsequent"]["value"])
        chans = {}
        for c in res["channels"]:
            sub = c.get("subsequent") or {"events": 0.0, "value": 0.0}
            chans[c["channel"]] = {"conversions": c["conversions"], "users": c["users"],
                                   "sub_events": sub["events"], "sub_value": sub["value"]}
        return {"kind": "attribution", "total": tot, "channels": chans}
    n = None
    cohorts = {}
    for c in res["cohorts"]:
        n = len(c["retained"])
        if c["size"]:
            cohorts[norm_label(c["start"])] = {"size": c["size"], "retained": c["retained"],
                                               "incomplete": c.get("incomplete")}
    return {"kind": "retention", "periods": n, "cohorts": cohorts, "mean": res.get("mean")}


# --------------------------------------------------------------- comparing


def same(a, b, counts):
    """Equality of two result numbers: exact for counts (missing = 0),
    relative 1e-9 for floats (summation order differs between engines)."""
    if a is None or b is None:
        return (a in (None, 0) and b in (None, 0)) if counts else a is None and b is None
    if counts:
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare(q, ref, got):
    """Differences between two canonical results, as readable lines."""
    diffs = []
    if q.kind == "funnel" and q.q.get("view") == "trends":
        rb, gb = ref["buckets"], got["buckets"]
        bad = [(lb, rb.get(lb), gb.get(lb)) for lb in sorted(set(rb) | set(gb)) if rb.get(lb) != gb.get(lb)]
        if bad:
            diffs.append(f"{len(bad)} bucket(s) differ, e.g. " + "; ".join(f"{lb}: {a} vs {b}" for lb, a, b in bad[:3]))
        return diffs
    if q.kind == "funnel" and q.q.get("view") == "time_to_convert":
        if ref["users"] != got["users"] or ref["bins"] != got["bins"]:
            diffs.append(f"histogram: {ref['users']} users {ref['bins']} vs {got['users']} users {got['bins']}")
        for f in ("avg_seconds", "median_seconds"):
            if not same(ref[f], got[f], False):
                diffs.append(f"{f}: {ref[f]} vs {got[f]}")
        return diffs
    if q.kind == "trend":
        maths = [s.get("math", "count") for s in q.q["series"]]
        for key in sorted(set(ref["series"]) | set(got["series"])):
            head = key.split("|")[0]
            counts = not head.startswith("f") and maths[int(head)] in ("count", "users")
            r = ref["series"].get(key, {"buckets": {}, "total": None})
            g = got["series"].get(key, {"buckets": {}, "total": None})
            bad = [(lb, r["buckets"].get(lb), g["buckets"].get(lb))
                   for lb in sorted(set(r["buckets"]) | set(g["buckets"]))
                   if not same(r["buckets"].get(lb), g["buckets"].get(lb), counts)]
            if bad:
                diffs.append(f"series {key}: {len(bad)} bucket(s) differ, e.g. " +
                             "; ".join(f"{lb}: {a} vs {b}" for lb, a, b in bad[:3]))
            if not same(r["total"], g["total"], counts):
                diffs.append(f"series {key}: total {r['total']} vs {g['total']}")
    elif q.kind == "funnel":
        groups = [("all", ref["steps"], got["steps"])]
        if q.breakdown:
            rb, gb = ref.get("breakdown") or {}, got.get("breakdown") or {}
            groups += [(k, rb.get(k), gb.get(k)) for k in sorted(set(rb) | set(gb))]
        for name, r, g in groups:
            if r is None or g is None:
                diffs.append(f"breakdown {name}: present in only one result")
                continue
            for k, (a, b) in enumerate(zip(r, g), 1):
                if a["users"] != b["users"]:
                    diffs.append(f"{name} step {k}: users {a['users']} vs {b['users']} ({b['users'] - a['users']:+d})")
                for f in ("avg_seconds", "median_seconds"):
                    if a[f] is not None and b[f] is not None and not same(a[f], b[f], False):
                        diffs.append(f"{name} step {k}: {f} {a[f]} vs {b[f]}")
    elif q.kind == "stickiness":
        bad = [(n, ref["counts"].get(n), got["counts"].get(n)) for n in sorted(set(ref["counts"]) | set(got["counts"]), key=int)
               if not same(ref["counts"].get(n), got["counts"].get(n), True)]
        if bad:
            diffs.append(f"{len(bad)} count(s) differ, e.g. " + "; ".join(f"n={n}: {a} vs {b}" for n, a, b in bad[:4]))
    elif q.kind == "lifecycle":
        z = [0, 0, 0, 0]
        bad = [(lb, ref["buckets"].get(lb, z), got["buckets"].get(lb, z))
               for lb in sorted(set(ref["buckets"]) | set(got["buckets"])) if ref["buckets"].get(lb, z) != got["buckets"].get(lb, z)]
        if bad:
            diffs.append(f"{len(bad)} bucket(s) differ ([new, returning, resurrecting, dormant]), e.g. " +
                         "; ".join(f"{lb}: {a} vs {b}" for lb, a, b in bad[:3]))
    elif q.kind == "paths":
        re_, ge = ref["edges"], got["edges"]
        only = sorted(set(re_) ^ set(ge))
        if only:
            diffs.append(f"{len(only)} edge(s) in one result only, e.g. {only[:3]}")
        bad = [k for k in sorted(set(re_) & set(ge)) if re_[k][:2] != ge[k][:2] or not same(re_[k][2], ge[k][2], False)]
        if bad:
            diffs.append(f"{len(bad)} edge(s) differ, e.g. " + "; ".join(f"{k}: {re_[k]} vs {ge[k]}" for k in bad[:3]))
    elif q.kind == "attribution":
        for f, v in ref["total"].items():
            if not same(v, got["total"].get(f), f in ("conversions", "users", "sub_events")):
                diffs.append(f"total {f}: {v} vs {got['total'].get(f)}")
        zero = {"conversions": 0.0, "users": 0, "sub_events": 0.0, "sub_value": 0.0}
        for c in sorted(set(ref["channels"]) | set(got["channels"])):
            a, b = ref["channels"].get(c, zero), got["channels"].get(c, zero)
            bad = [f for f in zero if not same(a[f], b[f], f == "users")]
            if bad:
                diffs.append(f"channel {c}: " + ", ".join(f"{f} {a[f]} vs {b[f]}" for f in bad))
    else:
        rc, gc = ref["cohorts"], got["cohorts"]
        n = min(ref["periods"] or 0, got["periods"] or 0)
        bad = []
        for lb in sorted(set(rc) | set(gc)):
            a = (rc.get(lb) or {"retained": [0] * n})["retained"][:n]
            b = (gc.get(lb) or {"retained": [0] * n})["retained"][:n]
            bad += [(lb, k, x, y) for k, (x, y) in enumerate(zip(a, b)) if x != y]
        if bad:
            diffs.append(f"{len(bad)} cell(s) differ, e.g. " + "; ".join(f"{lb} k={k}: {x} vs {y}" for lb, k, x, y in bad[:4]))
    return diffs


def add_periods(start, period, k):
    """The local start of the bucket k periods after the local bucket start."""
    if period == "month":
        m = start.month - 1 + k
        return start.replace(year=start.year + m // 12, month=m % 12 + 1)
    step = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(days=7)}[period]
    return start + k * step


def retention_mean(res, period, tz, data_end_us):
    """User-weighted mean per period over cohorts whose cell is complete:
    docs/analytics.md §2, cell (cohort c, k) is complete if bucket c+k ends at or before
    the end of the data (latest event + 1 µs; "now" is later here)."""
    n = res["periods"]
    num, den = [0] * n, [0] * n
    zone = ZoneInfo(tz)
    for lb, c in res["cohorts"].items():
        start = dt.datetime.fromisoformat(lb)
        for k in range(n):
            end = add_periods(start, period, k + 1).replace(tzinfo=zone)
            if int(end.timestamp()) * 1_000_000 <= data_end_us:
                num[k] += c["retained"][k]
                den[k] += c["size"]
    return [x / y if y else None for x, y in zip(num, den)]


def spur_self_checks(q, res, data_end_us):
    """Internal consistency checks of a Spur result (no peer needed)."""
    issues = []
    if q.kind == "funnel" and res.get("steps"):
        steps = res["steps"]
        u1 = steps[0]["users"] or 0
        for k, s in enumerate(steps):
            if k and s["users"] > steps[k - 1]["users"]:
                issues.append(f"step {k + 1} users {s['users']} > step {k} users {steps[k - 1]['users']}")
            conv = s["users"] / u1 if u1 else 0
            if s.get("conversion") is not None and not math.isclose(s["conversion"], conv, rel_tol=1e-12):
                issues.append(f"step {k + 1} conversion {s['conversion']} ≠ users/users1 {conv}")
    if q.kind == "retention":
        canon = spur_canonical(q, res)
        mine = retention_mean(canon, q.q.get("period", "day"), q.tz, data_end_us)
        for k, (a, b) in enumerate(zip(res.get("mean") or [], mine)):
            if b is not None and (a is None or not math.isclose(a, b, rel_tol=1e-9)):
                issues.append(f"mean[{k}] = {a}, recomputed from Spur's own cells (complete = bucket ends ≤ end of data): {b}")
                break
    return issues


# ------------------------------------------------------------------- report


def fmt_cell(r):
    """'median (min)' of a measurement with runs_ms, or '–'."""
    if not r or r.get("median_ms") is None:
        return "–"
    runs = r.get("runs_ms") or [r["median_ms"]]
    return f"{fmt_ms(r['median_ms'])} ({fmt_ms(min(runs))})"


def fmt_ms(x):
    return "–" if x is None else (f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.0f} ms")


def fmt_bytes(x):
    return "–" if not x else f"{x / 2**20:.0f} MiB"


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) * 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem / 2**30:.1f} GiB RAM, {platform.platform()}"


def versions(baseline, spur_bin):
    import chdb
    import duckdb
    v = {"python": platform.python_version(), "chdb": chdb.__version__,
         "clickhouse": baseline["chdb"].get("version", "?"), "duckdb": duckdb.__version__}
    g = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True)
    built = dt.datetime.fromtimestamp(os.path.getmtime(spur_bin), dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") \
        if os.path.exists(spur_bin) else "?"
    v["spur"] = f"binary {spur_bin} built {built} (working tree now {g.stdout.strip() or '?'})"
    return v


def write_report(a, ctx):
    """Writes (or replaces) this data size's section of the report file."""
    rows = []
    for r in ctx["rows"]:
        s, c, d = r["spur"], r["chdb"], r["duckdb"]
        sm = s.get("median_ms") if s.get("supported") else None

        def ratio(p):
            pm = p.get("median_ms")
            return f"{pm / sm:.2f}×" if pm and sm else "–"

        spur_cell = fmt_cell(s) if sm is not None else "not supported by Spur yet"
        rows.append(f"| {r['name']} | {spur_cell} | {fmt_bytes(s.get('peak_rss_bytes')) if sm else '–'} "
                    f"| {fmt_cell(c)} | {ratio(c)} | {fmt_bytes(c.get('peak_rss_bytes'))} "
                    f"| {fmt_cell(d)} | {ratio(d)} | {fmt_bytes(d.get('peak_rss_bytes'))} "
                    f"| {r['agree']} |")
    L = ctx["load"]
    ev = ctx["events"]
    sp = ctx["spur_rep"]
    spi = sp.get("import") or {}
    la = ctx["loadavg"]
    # The engines keep both cores busy themselves (load ≈ 2 during their
    # runs); well above that, other work shared the machine.
    shared = max(la) > 2.5
    # One section per data size, replaced in place on a rerun.
    begin, end = f"<!-- peers:{ev}:begin -->", f"<!-- peers:{ev}:end -->"
    lines = [
        begin,
        f"## Spur beside ClickHouse (chDB) and DuckDB — {ev / 1e6:g}M events",
        "",
        f"Produced by `bench/peers/run.py` on {ctx['when']}. Data: `spur gen --events {ev} --seed {a.seed}` "
        f"({ev:,} events, {ctx['users']:,} users, 90 days), Parquet {os.path.getsize(a.parquet):,} bytes. "
        f"Machine: {machine()}.",
        "",
        (f"**Measured on a shared, loaded machine**: 1-minute load average between {min(la):.1f} and {max(la):.1f} "
         f"during the runs (2 cores; the engines alone bring it to about 2, so other work was running). Treat "
         f"ratios as indicative; absolute times are inflated." if shared else
         f"1-minute load average during the runs: {min(la):.1f}–{max(la):.1f} (2 cores, which the engines keep "
         f"busy themselves; no other work was running). This VM's speed still varies by ±15 % from minute to "
         f"minute (neighbouring tenants), so ratios are indicative to about that."),
        "",
        f"Times: median (fastest) of {a.runs} timed runs after one warm-up, each engine and query in a fresh "
        "process; the three engines run one query after the other, so they see about the same load. "
        "Peak memory of the peers is the worker process's peak RSS (VmHWM; it includes the engine's code and "
        f"caches: an idle chDB process peaks at {fmt_bytes(ctx['baseline'].get('chdb'))}, DuckDB at "
        f"{fmt_bytes(ctx['baseline'].get('duckdb'))}; chDB has no system.query_log, so no engine-side figure); "
        "Spur's is `spur bench`'s peak_rss_bytes of the process that ran the query. Ratio = peer median / Spur median (> 1: Spur faster).",
        "",
        "| query | Spur | Spur RSS | ClickHouse | ratio | ClickHouse RSS | DuckDB | ratio | DuckDB RSS | answers |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "| storage and import | Spur | ClickHouse | DuckDB |",
        "|---|---|---|---|",
        f"| bytes on disk per event | {sp['bytes_on_disk'] / sp['events']:.2f} | "
        f"{L['chdb']['bytes_on_disk'] / ev:.2f} | {L['duckdb']['bytes_on_disk'] / ev:.2f} |",
        "| import from Parquet | " + (f"{spi['events_per_s'] / 1e6:.2f} M events/s ({spi['seconds']:.1f} s"
                                      f"{', from the generator, not Parquet' if spi.get('source') == 'generator' else ''}"
                                      + (f"; +{spi['compact_seconds']:.1f} s compaction → "
                                         f"{ev / (spi['seconds'] + spi['compact_seconds']) / 1e6:.2f} M/s"
                                         if spi.get('compact_seconds') else "") + ")"
                                      if spi else "– (app existed; not measured)") + " | "
        f"{ev / L['chdb']['insert_s'] / 1e6:.2f} M events/s ({L['chdb']['insert_s']:.1f} s INSERT; "
        f"+{L['chdb']['optimize_s']:.1f} s OPTIMIZE FINAL → {ev / (L['chdb']['insert_s'] + L['chdb']['optimize_s']) / 1e6:.2f} M/s) | "
        f"{ev / L['duckdb']['insert_s'] / 1e6:.2f} M events/s ({L['duckdb']['insert_s']:.1f} s, sort + CHECKPOINT) |",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in ctx["versions"].items()) + ".",
        "",
        "### Answers",
        "",
        *ctx["notes"],
        "",
        "### Setup of the peers",
        "",
        "- ClickHouse: chDB (embedded ClickHouse), default settings (max_threads = cores). Table `events` "
        "`ENGINE = MergeTree ORDER BY (user_id, timestamp)`, `event`/`platform`/`channel`/`country` as "
        "`LowCardinality(String)`, `timestamp DateTime64(6, 'UTC')`; loaded with "
        "`INSERT INTO events SELECT * FROM file(…, Parquet)`, then `OPTIMIZE TABLE events FINAL` "
        f"({L['chdb']['parts']} part(s) when measured).",
        "- DuckDB: default settings (threads = cores), a database file with "
        "`CREATE TABLE events AS SELECT * FROM read_parquet(…) ORDER BY user_id, timestamp` then `CHECKPOINT`; "
        "the connection is read-only with `TimeZone = 'UTC'`.",
        "- Spur: the app built by `spur import` of the same Parquet, plus `spur import --users` of one "
        "(user_id, platform, channel, country) row per user exported from it (the Parquet has no users table); "
        "times and memory from `spur bench` (one warm-up, then timed runs, each query in a fresh process), "
        "run query by query just before the peers' runs of the same query"
        + (f"; users import {spi['users_seconds']:.1f} s" if spi.get("users_seconds") else "") + ".",
        "",
        "### Semantics of the SQL (same as docs/analytics.md §4–§6, §10–§15)",
        "",
        "- Funnel, ClickHouse: `windowFunnel(W, 'strict_once')` over `toUInt64(toUnixTimestamp64Micro(timestamp))` "
        "(W in µs, inclusive), step 1 also requires `timestamp ∈ [from, to)`, rows read from `from` to `to + W`; users "
        "at step k = users with level ≥ k. windowFunnel has no time-to-convert, so only user counts are compared.",
        "- Funnel, DuckDB: each in-range step-1 event starts a greedy chain of ASOF joins (next step = the user's "
        "earliest matching event at or after the previous step, kept if ≤ t1 + W); a user's level is the longest "
        "chain and the counted attempt the chain that reaches it earliest (ties: latest t1). This equals docs/analytics.md §5 "
        "(PostHog's latest-entry rule) whenever each event matches at most one step, as in the bench funnels; "
        "avg/median seconds (linear-interpolated median) are compared.",
        "- User-property breakdowns group by the event's `platform`/`channel`/`country` column: the generator fixes "
        "them per user on every event but ad touchpoints, whose channel is the ad's (checked at load: "
        f"{L['chdb']['users_with_varying_props']} users with more than one value elsewhere).",
        "- Retention (first_time, calendar, `on`): start = the user's earliest start event in all data, cohort = its "
        "day if in [from, to), retained at k if some return event falls on day start+k. ClickHouse: one "
        "`GROUP BY user_id` pass with `minIf` and `groupUniqArrayIf`; DuckDB: the same as a join of starts and distinct (user, day).",
        "- Trends: `count`, exact users `uniqExact` / `count(DISTINCT)`, percentiles `quantilesExactInclusive` "
        "(R-7 = NumPy linear) / `quantile_cont`, in one scan with `GROUPING SETS ((breakdown, bucket), (breakdown))` "
        "for the range totals; the cohort filter is `user_id IN (users with ≥ N matching events in [from, to))`.",
        "- Stickiness (docs/analytics.md §13): per user the buckets with ≥ min_events matching events in [from, to), users per "
        "number of buckets (`GROUP BY user_id, bucket`, then by user).",
        "- Lifecycle (docs/analytics.md §14): per user the first event of any kind and the buckets with a matching event (in "
        "[from, to), or anywhere in the bucket before the range); new / returning / resurrecting per active bucket, "
        "dormant after an active bucket. ClickHouse: one `GROUP BY user_id` pass with `min` and `groupUniqArrayIf`, "
        "then arrays; DuckDB: self-joins of the distinct (user, bucket) pairs.",
        "- Paths (docs/analytics.md §15) from a start event: the range's events in time order per user, split into sessions at "
        "gaps ≥ session_gap, runs of one event collapsed into the last, each session from its first start event, "
        "`steps` long, edges per position with sessions, users and mean µs. ClickHouse: `groupArray`, `arraySplit`, "
        "`arrayFilter` (PostHog's shape); DuckDB: window functions (`lag`, `lead`, running `sum`, `row_number`). The "
        "edges kept (min_sessions, the max_edges heaviest, reachable from position 1) are chosen from the rows as "
        "Spur does after its scan.",
        "- Attribution (docs/analytics.md §10), all conversions of one event, touchpoints of distinct event names with lookbacks: "
        "last_touch by ASOF joins (the latest touchpoint of each matcher at or before the conversion; the first "
        "matcher's if within its lookback, else the next's), time_decay by joining every eligible touchpoint, "
        "weight 2^(−age/half-life) normalised per conversion; subsequent events take the shares of the user's "
        "latest conversion (ASOF join) within the window. Shares are compared to 1e-9 relative.",
        "- Strict funnel (both engines, window functions, not `windowFunnel(…, 'strict_order')`, which stops at the "
        "first interruption after the user's first step-1 event where docs/analytics.md §11 opens a new attempt): the user's events "
        "in [from, to + W] as tie groups, runs of equal steps (other events step 0); an attempt enters at the last "
        "event of a step-1 run and reaches k when the next runs are steps 2..k, run k starting within W. Exact when "
        "each event matches one step and no tie group mixes two steps; times compared with both.",
        "- Unordered funnel: per step event in [from, to), a `RANGE` frame `[t, t + W]` over the user's step events "
        "counts the steps present (ClickHouse frames over milliseconds: exact for the generator's millisecond "
        "timestamps); users per step only.",
        "- Funnel trends: DuckDB counts the users of each bucket (of t1) whose ASOF chain reaches from/to step (every "
        "chain is an attempt, docs/analytics.md §11); ClickHouse runs `windowFunnel(W, 'strict_once')` (which tracks every "
        "sequence) per (user, bucket) with step 1 restricted to the bucket. Time to convert (DuckDB): the counted "
        "chains' times, binned by Spur's rule in the script. Exclusions are not translated.",
        "- Formulas and compare: the trend SQL per period (the previous range computed by docs/analytics.md §12's rule) in one "
        "`UNION ALL`, formulas evaluated by the script on the decoded series.",
        "",
        "### Reproduce",
        "",
        "```sh",
        *ctx["commands"],
        "```",
        end,
    ]
    text = "\n".join(lines) + "\n"
    out = os.path.join(REPO, a.out) if not os.path.isabs(a.out) else a.out
    if os.path.exists(out):
        with open(out) as f:
            old = f.read()
        if begin in old and end in old:
            text = old[:old.index(begin)] + text.rstrip("\n") + old[old.index(end) + len(end):]
        else:
            text = old.rstrip("\n") + "\n\n" + text
    else:
        text = "# Performance\n\n" + text
    with open(out, "w") as f:
        f.write(text)
    return out


# --------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker", help="internal: one engine × query in this process")
    w.add_argument("--engine", required=True, choices=["chdb", "duckdb"])
    w.add_argument("--db", required=True)
    w.add_argument("--query")
    w.add_argument("--runs", type=int, default=5)
    ld = sub.add_parser("load", help="internal: load the Parquet into one engine in this process")
    ld.add_argument("--engine", required=True, choices=["chdb", "duckdb"])
    ld.add_argument("--db", required=True)
    ld.add_argument("--parquet", required=True)
    us = sub.add_parser("users", help="internal: export one row of user properties per user as CSV")
    us.add_argument("--parquet", required=True)
    us.add_argument("--csv", required=True)
    ap.add_argument("--parquet", help="events file from `spur gen --out` (required unless worker)")
    ap.add_argument("--seed", type=int, default=1, help="the seed the Parquet was generated with (for the report)")
    ap.add_argument("--work", default="/tmp/spur-peers", help="directory for the peers' databases (not the repo)")
    ap.add_argument("--reload", action="store_true", help="reload the peers even if their databases exist")
    ap.add_argument("--queries", default=os.path.join(REPO, "bench", "queries"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--engines", default="chdb,duckdb")
    ap.add_argument("--spur-json", help="Spur results in the `spur bench --out` shape: read if it exists, "
                    "else measured and written here (default WORK/STEM.spur.json)")
    ap.add_argument("--remeasure-spur", action="store_true",
                    help="measure Spur's queries again even if the --spur-json file exists (keeps its import figure)")
    ap.add_argument("--spur-bin", default="/tmp/spurbin")
    ap.add_argument("--spur-data", default="/tmp/spur-peers/spur")
    ap.add_argument("--spur-app", default="peers")
    ap.add_argument("--out", default="docs/performance.md")
    ap.add_argument("--results", help="also write every engine's raw results and SQL as JSON here")
    a = ap.parse_args()
    if a.cmd == "worker":
        worker(a)
        return
    if a.cmd == "load":
        res = (load_chdb if a.engine == "chdb" else load_duckdb)(a.parquet, a.db)
        res["peak_rss_bytes"] = vm_hwm()
        json.dump(res, sys.stdout)
        return
    if a.cmd == "users":
        export_users(a.parquet, a.csv)
        return
    if not a.parquet:
        ap.error("--parquet is required")
    os.makedirs(a.work, exist_ok=True)
    engines = a.engines.split(",")
    stem = os.path.splitext(os.path.basename(a.parquet))[0]
    dbs = {"chdb": os.path.join(a.work, f"{stem}.chdb"), "duckdb": os.path.join(a.work, f"{stem}.duckdb")}
    loadfile = os.path.join(a.work, f"{stem}.load.json")
    load = json.load(open(loadfile)) if os.path.exists(loadfile) and not a.reload else {}
    loadavg = [os.getloadavg()[0]]
    for e in engines:
        if e not in load or not os.path.exists(dbs[e]):
            print(f"loading {a.parquet} into {e} …", file=sys.stderr, flush=True)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "load", "--engine", e, "--db", dbs[e],
                                "--parquet", a.parquet], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"loading {e} failed: {p.stderr.strip()}")
            load[e] = json.loads(p.stdout)
            load[e]["loadavg"] = os.getloadavg()
            loadavg.append(load[e]["loadavg"][0])
            print(f"  {e}: {load[e]}", file=sys.stderr, flush=True)
            with open(loadfile, "w") as f:
                json.dump(load, f, indent=1)
    queries = []
    for f in sorted(os.listdir(a.queries)):
        if f.endswith(".json"):
            queries.append(Query(os.path.join(a.queries, f)))
    spur = SpurSide(a)
    spur_rep = spur.rep
    base_runs = {e: run_worker(e, dbs[e], None, 0) for e in engines}
    baseline = {e: base_runs[e].get("peak_rss_bytes") for e in engines}
    data_end = load[engines[0]]["data_end_us"]
    rows, notes, raw = [], [], {}
    for q in queries:
        print(f"query {q.name} …", file=sys.stderr, flush=True)
        r = {"name": q.name, "spur": spur.result(q)}
        s = r["spur"]
        print(f"  spur: {fmt_ms(s.get('median_ms'))} {s.get('error', '')}", file=sys.stderr, flush=True)
        loadavg.append(os.getloadavg()[0])
        ref = spur_canonical(q, s["result"]) if s["supported"] and s.get("result") else None
        got = {}
        for e in ("chdb", "duckdb"):
            r[e] = run_worker(e, dbs[e], q.path, a.runs) if e in engines else {}
            if r[e].get("loadavg"):
                loadavg.append(r[e]["loadavg"][0])
            if r[e].get("error"):
                notes.append(f"- **{q.name}**, {e}: error `{r[e]['error']}`")
            elif r[e].get("unsupported"):
                notes.append(f"- **{q.name}**, {e}: not translated to SQL ({r[e]['unsupported']})")
            elif r[e]:
                got[e] = r[e]["result"]
            print(f"  {e}: {fmt_ms(r[e].get('median_ms'))} {r[e].get('error', '')}", file=sys.stderr, flush=True)
        problems = []
        if ref is None:
            problems.append(f"not supported by Spur yet (`{s.get('error', '')}`)")
            for e1, e2 in (("chdb", "duckdb"),):
                if e1 in got and e2 in got:
                    dd = compare(q, got[e1], got[e2])
                    problems += [f"ClickHouse vs DuckDB: {x}" for x in dd] or ["ClickHouse and DuckDB agree"]
            r["agree"] = "Spur: n/a; peers " + ("agree" if problems[-1].endswith("agree") else "DIFFER")
        else:
            bad = False
            for e in got:
                dd = compare(q, ref, got[e])
                bad |= bool(dd)
                problems += [f"Spur vs {e}: {x}" for x in dd]
            if q.kind == "retention" and ref.get("mean"):
                for e in got:
                    mine = retention_mean(got[e], q.q.get("period", "day"), q.tz, data_end)
                    dm = [(k, x, y) for k, (x, y) in enumerate(zip(ref["mean"], mine))
                          if y is not None and (x is None or not math.isclose(x, y, rel_tol=1e-9))]
                    if dm:
                        bad = True
                        problems.append(f"Spur vs {e}: mean differs at {len(dm)} period(s), e.g. " +
                                        "; ".join(f"k={k}: {x} vs {y}" for k, x, y in dm[:3]))
            for x in spur_self_checks(q, s["result"], data_end):
                bad = True
                problems.append(f"Spur self-check: {x}")
            r["agree"] = "**MISMATCH**" if bad else ("all equal" if got else "no peer translation")
        for p in problems:
            notes.append(f"- **{q.name}**: {p}")
        plain_funnel = q.kind == "funnel" and q.q.get("order", "ordered") == "ordered" and q.q.get("view", "steps") == "steps"
        if ref is not None and not problems and got:
            notes.append(f"- **{q.name}**: Spur, " + " and ".join(
                {"chdb": "ClickHouse", "duckdb": "DuckDB"}[e] for e in got) + " return the same numbers"
                + (" (ClickHouse `windowFunnel` and Spur differ by 0 users at every step; docs/analytics.md §5 allows a "
                   "difference only where tied events each match several steps"
                   + ("; times to convert equal DuckDB's" if "duckdb" in got else "") + ")"
                   if plain_funnel and "chdb" in got else "") + ".")
        rows.append(r)
        raw[q.name] = {"spur": ref, **{e: {"sql": r[e].get("sql"), "result": got.get(e)} for e in engines}}
        print("\n".join("   " + p for p in problems), file=sys.stderr, flush=True)
    spur.save()
    ev = spur_rep.get("events") or load[engines[0]]["events"]
    cmds = [
        f"cd {REPO}",
        f"go build -o {a.spur_bin} ./cmd/spur",
        f"{a.spur_bin} gen --events {ev} --seed {a.seed} --out {a.parquet}",
        "python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install -r bench/peers/requirements.txt",
        f"/tmp/peervenv/bin/python bench/peers/run.py --parquet {a.parquet} --seed {a.seed} --work {a.work} "
        f"--runs {a.runs} --spur-bin {a.spur_bin} --spur-data {a.spur_data} --spur-app {a.spur_app}"
        + (f" --spur-json {a.spur_json}" if a.spur_json else ""),
    ]
    ctx = {"rows": rows, "notes": notes, "load": load, "events": ev, "users": spur_rep.get("users") or 0,
           "spur_rep": spur_rep, "loadavg": loadavg, "baseline": baseline, "versions": versions(base_runs, a.spur_bin),
           "when": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commands": cmds}
    out = write_report(a, ctx)
    if a.results:
        with open(a.results, "w") as f:
            json.dump(raw, f, indent=1)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
