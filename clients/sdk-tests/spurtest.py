"""Helpers of the SDK tests: a real `spur serve`, Spur's HTTP API, and a fault-injecting proxy.

Nothing here imports Spur: the tests see Spur only as the SDK clients and a user of its API do, over
HTTP on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import requests


class Spur:
    """A `spur serve` process on 127.0.0.1:0 over the store directory `data`.

    auth "none" serves without keys (the SDK key fields are read as app names); auth "keys" needs
    `admin_key`, a key made beforehand with `spur keys create --scope admin`, for the queries.
    """

    def __init__(self, binary: str, data: str, auth: str = "none", admin_key: Optional[str] = None,
                 extra: Iterable[str] = ()) -> None:
        self.admin_key = admin_key
        self.proc = subprocess.Popen(
            [binary, "--data", data, "serve", "--auth", auth, "--listen", "127.0.0.1:0",
             "--debug-listen", "", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log: List[str] = []
        self.url = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"UI and API on (http://\S+?)/? ", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            self.proc.kill()
            raise RuntimeError("spur serve printed no address:\n" + "".join(self.log))
        # Keep draining its output so that the process never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        self.http = requests.Session()
        if admin_key:
            self.http.headers["Authorization"] = "Bearer " + admin_key

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)

    def close(self) -> None:
        """Stops the server with SIGTERM (graceful) and waits for it."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # --- Spur's own API -------------------------------------------------------------------------

    def apps(self) -> List[str]:
        r = self.http.get(self.url + "/api/apps", timeout=30)
        r.raise_for_status()
        return sorted(a["name"] for a in r.json()["apps"])

    def query(self, app: str, q: dict) -> dict:
        r = self.http.post(f"{self.url}/api/apps/{app}/query", json=q, timeout=60)
        assert r.status_code == 200, f"query {q} of app {app}: {r.status_code} {r.text}"
        return r.json()

    def counts(self, app: str, names: Iterable[str]) -> Dict[str, int]:
        """Events per name over the app's whole data, and "$any": all of its events (0s for an app
        that does not exist)."""
        names = list(names)
        if "$any" not in names:
            names.append("$any")
        if app not in self.apps():
            return {n: 0 for n in names}
        res = self.query(app, {"kind": "trend", "interval": "month",
                               "series": [{"event": n} for n in names]})
        return {s["event"]: int(s["total"]) for s in res["series"]}

    def assert_counts(self, app: str, expected: Dict[str, int]) -> None:
        """Exactly `expected` events by name, and no event of any other name (a query's counts:
        the schema's event counts are not used, as they count a resend across requests twice)."""
        want = dict(expected)
        want["$any"] = sum(expected.values())
        got = self.counts(app, want)
        assert got == want, f"app {app}: events by name {got}, want {want}"

    def schema(self, app: str) -> dict:
        r = self.http.get(f"{self.url}/api/apps/{app}/schema", timeout=30)
        assert r.status_code == 200, f"schema of {app}: {r.status_code} {r.text}"
        return r.json()

    def breakdown(self, app: str, event: str, prop: str, source: str = "event") -> Dict[str, int]:
        """Events named `event` by the value of `prop`, as the breakdown's value strings ("(none)": not set)."""
        res = self.query(app, {"kind": "trend", "interval": "month", "series": [{"event": event}],
                               "breakdown": {"property": prop, "source": source, "limit": 100}})
        return {s["breakdown_value"]: int(s["total"]) for s in res["series"] if s["total"]}

    def person(self, app: str, distinct_id: str) -> dict:
        r = self.http.get(f"{self.url}/api/apps/{app}/persons/{urllib.parse.quote(distinct_id, safe='')}",
                          timeout=30)
        assert r.status_code == 200, f"person {distinct_id} of {app}: {r.status_code} {r.text}"
        return r.json()

    def trail(self, app: str, distinct_id: str) -> List[dict]:
        """The person's events in order (all pages)."""
        out: List[dict] = []
        while True:
            r = self.http.get(
                f"{self.url}/api/apps/{app}/persons/{urllib.parse.quote(distinct_id, safe='')}/events",
                params={"offset": len(out), "limit": 1000, "tz": "UTC"}, timeout=30)
            assert r.status_code == 200, f"events of {distinct_id} in {app}: {r.status_code} {r.text}"
            page = r.json()
            out.extend(page["events"])
            if len(out) >= page["total"] or not page["events"]:
                return out

    def event(self, app: str, distinct_id: str, insert_id: str) -> dict:
        """The one event of the person of `distinct_id` with that insert id."""
        found = [e for e in self.trail(app, distinct_id) if e.get("insert_id") == insert_id]
        assert len(found) == 1, f"{app}: {len(found)} events with insert_id {insert_id} for {distinct_id}"
        return found[0]

    def assert_one_person(self, app: str, ids: Iterable[str], person_id: str) -> dict:
        """Every id of `ids` resolves to one person, `person_id`, whose distinct ids are exactly `ids`."""
        ids = sorted(ids)
        people = [self.person(app, i) for i in ids]
        for i, p in zip(ids, people):
            assert p["person_id"] == person_id, f"{app}: id {i} is person {p['person_id']}, want {person_id}: {p}"
            assert sorted(p["distinct_ids"]) == ids, f"{app}: id {i} has distinct_ids {p['distinct_ids']}, want {ids}"
        return people[0]


def subset(props: dict, keys: Iterable[str]) -> dict:
    """The entries of props named by keys (absent ones left out)."""
    return {k: props[k] for k in keys if k in props}


# --- A proxy that fails the first request of each path ------------------------------------------


@dataclass
class Seen:
    """One request the proxy received, the status it answered, and the server's (0: not sent on)."""
    method: str
    path: str
    headers: Dict[str, str]
    body: bytes
    status: int = 0
    upstream: int = 0


@dataclass
class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of `upstream` that answers the first request on each path
    (the path without its query) with `status` and `Retry-After: 1` and forwards the others;
    with fail False it forwards every request (a recorder). With stored True the failed request
    is forwarded first and the server's answer replaced by the failure (an acknowledgement lost
    on its way back: the resend must be deduplicated); else it never reaches the server.

    The failure's body is JSON with "code" (Amplitude's client reads it).
    """

    upstream: str
    status: int = 503
    fail: bool = True
    stored: bool = False
    seen: List[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: set = set()
        up = urllib.parse.urlsplit(self.upstream)
        self._host, self._port = up.hostname, up.port
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                seen = Seen(self.command, self.path, {k: v for k, v in self.headers.items()}, body)
                path = self.path.split("?", 1)[0]
                with proxy._lock:
                    proxy.seen.append(seen)
                    fail = proxy.fail and path not in proxy._failed
                    proxy._failed.add(path)
                if not fail or proxy.stored:
                    status, headers, out = proxy._forward(self.command, self.path, self.headers, body)
                    seen.upstream = status
                if fail:
                    status, headers = proxy.status, [("Retry-After", "1"), ("Content-Type", "application/json")]
                    out = json.dumps({"code": proxy.status, "error": "injected by the test proxy"}).encode()
                seen.status = status
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_POST = do_GET = do_PUT = _any

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _forward(self, method: str, path: str, headers, body: bytes) -> Tuple[int, List[Tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=60)
        try:
            hdrs = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def statuses(self, path_prefix: str = "") -> List[int]:
        """The statuses answered, in order, to requests whose path starts with path_prefix."""
        with self._lock:
            return [s.status for s in self.seen if s.path.startswith(path_prefix)]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def wait_until(cond, timeout: float = 20.0, what: str = "condition") -> None:
    """Polls cond() every 50 ms until it is true; fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def post(url: str, body: bytes, headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes]:
    """A raw POST: (status, headers, body) whatever the status."""
    r = requests.post(url, data=body, headers=headers or {}, timeout=60)
    return r.status_code, dict(r.headers), r.content


def env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"set {name} (clients/sdk-tests/run.sh does)")
    return v
