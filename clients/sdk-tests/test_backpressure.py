"""Backpressure from the server itself: a `spur serve` with 64 KiB for unflushed events answers 503
+ Retry-After in each protocol's shape while a flush is due; the real clients wait, resend, and
every event is stored exactly once."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest
from amplitude import Amplitude, BaseEvent, Config
from posthog import Posthog
from segment.analytics import Client

from spurtest import FaultProxy, Spur, env, wait_until

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
N, BATCH = 600, 100  # six requests of about 30 KB each: over the 64 KiB from the third on
PAD = "x" * 200


@pytest.fixture(scope="module")
def tight(tmp_path_factory) -> Iterator[Spur]:
    s = Spur(env("SPUR_BIN"), str(tmp_path_factory.mktemp("spur-tight")),
             extra=["--ingest-memory", "64KiB", "--flush-age", "300ms"])
    yield s
    s.close()


def at(i: int) -> datetime:
    return T0 + timedelta(milliseconds=i)


def test_posthog_python_backpressure(tight: Spur, app: str) -> None:
    rec = FaultProxy(tight.url, fail=False)
    errors: list = []
    ph = Posthog(app, host=rec.url + "/ingest/posthog", flush_at=BATCH, max_retries=5, disable_geoip=True,
                 on_error=lambda e, b: errors.append(e))
    for i in range(N):
        ph.capture("bp", distinct_id=f"u-{i % 7}", properties={"pad": PAD, "i": i}, timestamp=at(i),
                   uuid=str(uuid.UUID(int=i + 1, version=4)))
    ph.flush(timeout_seconds=60)
    ph.shutdown()
    rec.close()
    assert errors == []
    assert 503 in rec.statuses(), rec.statuses()
    tight.assert_counts(app, {"bp": N})


def test_segment_python_backpressure(tight: Spur, app: str) -> None:
    rec = FaultProxy(tight.url, fail=False)
    errors: list = []
    seg = Client(write_key=app, host=rec.url + "/ingest/segment", upload_size=BATCH, max_retries=10,
                 on_error=lambda e, b: errors.append(e))
    for i in range(N):
        seg.track(user_id=f"u-{i % 7}", event="bp", properties={"pad": PAD, "i": i}, timestamp=at(i),
                  message_id=f"bp-{i}")
    seg.flush()
    seg.shutdown()
    rec.close()
    assert errors == []
    assert 503 in rec.statuses(), rec.statuses()
    tight.assert_counts(app, {"bp": N})


def test_amplitude_python_backpressure(tight: Spur, app: str) -> None:
    rec = FaultProxy(tight.url, fail=False)
    codes: dict = {}
    lock = threading.Lock()

    def callback(e, code, msg=None):
        with lock:
            codes[e.insert_id] = code

    # Batches of 200 (about 60 KB): the second request is over the limit unless a flush came first.
    n = 2 * N
    amp = Amplitude(app, Config(server_url=rec.url + "/ingest/amplitude/2/httpapi", flush_queue_size=2 * BATCH,
                                flush_interval_millis=100, min_id_length=1, callback=callback))
    for i in range(n):
        amp.track(BaseEvent("bp", user_id=f"u-{i % 7}", time=int(at(i).timestamp() * 1000), insert_id=f"bp-{i}",
                            event_properties={"pad": PAD, "i": i}))
    for f in amp.flush():
        f.result()
    wait_until(lambda: len(codes) == n and set(codes.values()) == {200}, 60, "every event acknowledged")
    amp.shutdown()
    rec.close()
    assert 503 in rec.statuses(), rec.statuses()
    tight.assert_counts(app, {"bp": n})
