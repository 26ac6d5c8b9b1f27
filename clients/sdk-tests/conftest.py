"""Fixtures: a real `spur serve` (SPUR_BIN, built by run.sh) on a fresh store, one app per test."""

from __future__ import annotations

import re
import subprocess
from typing import Iterator

import pytest

from spurtest import FaultProxy, Spur, env


@pytest.fixture(scope="session")
def spur(tmp_path_factory) -> Iterator[Spur]:
    """`spur serve --auth none`: each SDK key field is read as the app's name."""
    s = Spur(env("SPUR_BIN"), str(tmp_path_factory.mktemp("spur-data")))
    yield s
    s.close()
    assert s.proc.returncode == 0, "spur serve did not exit cleanly on SIGTERM:\n" + "".join(s.log)


class Keyed:
    """A `spur serve --auth keys` whose store has an ingest key of app "keyed" and an admin key."""

    def __init__(self, binary: str, data: str) -> None:
        def create(*args: str) -> str:
            out = subprocess.run([binary, "--data", data, "keys", "create", *args],
                                 check=True, capture_output=True, text=True).stdout
            return out.strip().splitlines()[0]

        self.ingest_key = create("--app", "keyed", "--scope", "ingest")
        self.other_key = create("--app", "other", "--scope", "ingest")
        self.query_key = create("--app", "keyed", "--scope", "query")
        self.spur = Spur(binary, data, auth="keys", admin_key=create("--scope", "admin"))


@pytest.fixture(scope="session")
def keyed(tmp_path_factory) -> Iterator[Keyed]:
    k = Keyed(env("SPUR_BIN"), str(tmp_path_factory.mktemp("spur-keyed")))
    yield k
    k.spur.close()


@pytest.fixture()
def app(request) -> str:
    """An app name of this test's own: [a-z0-9][a-z0-9_-]{0,63}."""
    name = re.sub(r"[^a-z0-9_-]+", "-", request.node.name.lower()).strip("-_")
    return name[-60:].lstrip("-_") or "app"


@pytest.fixture(params=["lost-request", "lost-answer"])
def proxy(spur: Spur, request) -> Iterator[FaultProxy]:
    """A proxy in front of the server failing the first request on each path with 503: the request
    never reaches the server (lost-request), or the server stores it and its answer is replaced
    (lost-answer: the resend must be deduplicated)."""
    p = FaultProxy(spur.url, stored=request.param == "lost-answer")
    yield p
    p.close()
