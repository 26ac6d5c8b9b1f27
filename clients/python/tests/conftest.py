"""Fixtures: a real `spur serve` over a demo store (SPUR_BIN, SPUR_DATA)."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Iterator, Tuple

import pytest

from spur import Client


@pytest.fixture(scope="session")
def server() -> Iterator[Tuple[str, str]]:
    """The server's base URL and the admin key of the login URL it prints at its first start."""
    binary, data = os.environ.get("SPUR_BIN"), os.environ.get("SPUR_DATA")
    if not binary or not data:
        pytest.fail("set SPUR_BIN (the spur binary) and SPUR_DATA (a store from `spur demo --keep DIR`); .ci/run does")
    proc = subprocess.Popen([binary, "serve", "--data", data, "--listen", "127.0.0.1:0", "--debug-listen", ""],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = key = None
        for line in proc.stdout:  # type: ignore[union-attr]
            m = re.search(r"UI and API on (http://\S+/)", line)
            if m:
                url = m.group(1)
            k = re.search(r"#key=(spur_[a-z2-7]{32})$", line.strip())
            if k:
                key = k.group(1)
            if "create more keys" in line or "needs a key" in line:
                break
        assert url and key, "spur serve did not print its address and login URL"
        yield url, key
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0, "spur serve did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def server_url(server: Tuple[str, str]) -> str:
    return server[0]


@pytest.fixture()
def client(server: Tuple[str, str]) -> Iterator[Client]:
    with Client(server[0], key=server[1]) as c:
        yield c
