"""Fixtures: a real `spur serve` over a demo store (SPUR_BIN, SPUR_DATA)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Iterator

import pytest

from spur import Client


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    binary, data = os.environ.get("SPUR_BIN"), os.environ.get("SPUR_DATA")
    if not binary or not data:
        pytest.fail("set SPUR_BIN (the spur binary) and SPUR_DATA (a store from `spur demo --keep DIR`); .ci/run does")
    proc = subprocess.Popen([binary, "serve", "--data", data, "--listen", "127.0.0.1:0", "--debug-listen", ""],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            m = re.search(r"UI and API on (http://\S+/)", line)
            if m:
                url = m.group(1)
                break
        assert url, "spur serve did not print its address"
        yield url
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0, "spur serve did not exit cleanly on SIGTERM"


@pytest.fixture()
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as c:
        yield c
