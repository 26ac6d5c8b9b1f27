#!/usr/bin/env bash
# Drives the real SDK clients, installed from the package registries at pinned versions, against a
# real `spur serve`: posthog, segment-analytics-python, amplitude-analytics and mixpanel (pytest in
# a fresh venv, requirements.txt) and posthog-go and analytics-go (go/, a Go module of its own).
# Builds spur, runs everything, exits non-zero on a failure, and stops what it started.
#
#   bash clients/sdk-tests/run.sh               # the tests (CI: .ci/run)
#   bash clients/sdk-tests/run.sh --throughput  # also events/s of each SDK path vs the native
#                                               # endpoint (100k events, batches of 1000): pre-built
#                                               # bodies (go/throughput), spur loadgen, and the
#                                               # Python SDK clients themselves (throughput_sdk.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
throughput=0
for arg in "$@"; do
  case $arg in
    --throughput) throughput=1 ;;
    *) echo "usage: $0 [--throughput]" >&2; exit 2 ;;
  esac
done
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== SDK clients (PostHog, Segment, Amplitude, Mixpanel; Python and Go) against a real spur serve"
go build -o "$tmp/spur" ./cmd/spur
export SPUR_BIN="$tmp/spur"

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r clients/sdk-tests/requirements.txt
"$tmp/venv/bin/pip" check >/dev/null

echo "-- Python SDK clients (pytest)"
(cd clients/sdk-tests && PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider \
  --basetemp "$tmp/pytest" .)

echo "-- Go SDK clients (go test)"
(cd clients/sdk-tests/go && go mod download && go test -count=1 ./...)

if [ "$throughput" = 1 ]; then
  echo "-- throughput: server side, pre-built bodies of each protocol vs the native endpoint"
  "$tmp/spur" --data "$tmp/tp-data" serve --auth none --listen 127.0.0.1:0 --debug-listen "" >"$tmp/tp.log" 2>&1 &
  pids+=($!)
  url=""
  for _ in $(seq 100); do
    url=$(sed -n 's|.*UI and API on \(http://[^ ]*\)/ .*|\1|p' "$tmp/tp.log" | head -n 1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$tmp/tp.log" >&2; exit 1; }
  (cd clients/sdk-tests/go && go run ./throughput -url "$url" -events 100000 -batch 1000)
  echo "-- throughput: spur loadgen (spur gen's events) per protocol"
  for p in native posthog segment amplitude mixpanel; do
    printf '%-10s ' "$p"
    "$tmp/spur" loadgen --url "$url" --app "lg-$p" --protocol "$p" --events 100000 --batch 1000 --duration 0 \
      --time gen 2>&1 | grep 'acknowledged in'
  done
  echo "-- throughput: through the Python SDK clients vs native posts from Python"
  (cd clients/sdk-tests && PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" throughput_sdk.py --url "$url" \
    --events 100000 --batch 1000)
fi
cd "$root"
