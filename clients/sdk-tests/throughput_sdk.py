"""Events/s through the real posthog-python and segment-python clients into `spur serve`, against
the native events endpoint posted from Python at the same batch size.

The time runs from the first call to the end of flush() (posthog, segment) or of the last post
(native), and the stored count is checked exactly. Not part of the default run:
`clients/sdk-tests/run.sh --throughput` runs it (and go/throughput, the server side alone).

    python throughput_sdk.py --events 100000 --batch 1000
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from datetime import datetime, timedelta, timezone

import requests
from posthog import Posthog
from segment.analytics import Client

from spurtest import Spur, env

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def posthog_run(url: str, app: str, n: int, batch: int) -> None:
    ph = Posthog(app, host=url + "/ingest/posthog", flush_at=batch, max_queue_size=n + 1, disable_geoip=True,
                 flush_interval=0.5)
    for i in range(n):
        ph.capture("tp", distinct_id=f"user-{i % 5000}", properties={"plan": "p%d" % (i % 3), "n": i},
                   timestamp=T0 + timedelta(milliseconds=i), uuid=str(uuid.UUID(int=i + 1, version=4)))
    ph.flush(timeout_seconds=None)
    ph.shutdown()


def segment_run(url: str, app: str, n: int, batch: int) -> None:
    seg = Client(write_key=app, host=url + "/ingest/segment", upload_size=batch, max_queue_size=n + 1,
                 upload_interval=0.5)
    for i in range(n):
        seg.track(user_id=f"user-{i % 5000}", event="tp", properties={"plan": "p%d" % (i % 3), "n": i},
                  timestamp=T0 + timedelta(milliseconds=i), message_id=f"s-{i}")
    seg.flush()
    seg.shutdown()


def native_run(url: str, app: str, n: int, batch: int) -> None:
    with requests.Session() as s:
        for start in range(0, n, batch):
            evs = [{"user_id": f"user-{i % 5000}", "event": "tp", "insert_id": f"n-{i}",
                    "timestamp": (T0 + timedelta(milliseconds=i)).isoformat(),
                    "properties": {"plan": "p%d" % (i % 3), "n": i}} for i in range(start, min(start + batch, n))]
            r = s.post(f"{url}/api/apps/{app}/events", data=json.dumps(evs), timeout=120)
            assert r.status_code == 200 and r.json()["accepted"] == len(evs), r.text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="a running spur serve --auth none (default: start SPUR_BIN on a fresh store)")
    ap.add_argument("--data", help="store directory when starting SPUR_BIN")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    spur = None
    url = args.url
    if not url:
        spur = Spur(env("SPUR_BIN"), args.data or env("SPUR_TP_DATA"))
        url = spur.url
    q = Spur.__new__(Spur)
    q.url, q.http = url, requests.Session()
    run = str(int(time.time()))
    print(f"{'path':<28} {'events':>8} {'batch':>6} {'seconds':>8} {'events/s':>10}")
    try:
        for name, fn in (("native (python requests)", native_run), ("posthog-python 7.91.1", posthog_run),
                         ("segment-python 2.4.0", segment_run)):
            app = f"tps-{name.split()[0].split('-')[0]}-{run}"
            start = time.perf_counter()
            fn(url, app, args.events, args.batch)
            secs = time.perf_counter() - start
            got = q.counts(app, ["tp"])["tp"]
            assert got == args.events, f"{name}: {got} events stored, want {args.events}"
            print(f"{name:<28} {args.events:>8} {args.batch:>6} {secs:>8.2f} {args.events / secs:>10.0f}")
    finally:
        if spur:
            spur.close()


if __name__ == "__main__":
    main()
