#!/usr/bin/env bash
# Tests the Python client against a real `spur serve`: builds spur, makes
# the demo store (with the generator's app "shop" for attribution), installs the client with pip into a fresh venv and runs
# pytest. Exits non-zero on failure. Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/spur" ./cmd/spur
"$tmp/spur" demo --keep "$tmp/data" >"$tmp/demo.log"
"$tmp/spur" --data "$tmp/data" gen --events 300000 --seed 1 --app shop >>"$tmp/demo.log"
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check "./clients/python[test]"
SPUR_BIN="$tmp/spur" SPUR_DATA="$tmp/data" "$tmp/venv/bin/python" -m pytest -q clients/python/tests
