#!/usr/bin/env bash
# The durability test of ingest.md §2 (issue 17): while `spur loadgen`
# sends events, `kill -9` the server N times at random moments and start
# it again; loadgen retries every unacknowledged batch unchanged. At the
# end the app must hold every acknowledged event exactly once (loadgen
# --check: per user, the count and a checksum of the events).
#
#   bench/live/kill9.sh [KILLS=100] [RATE=20000] [LOADGEN FLAGS...]
#
# Extra loadgen flags send identity traffic too (docs/identity.md §4): with
# `--identify-every 20` every 20th event is an $identify joining its
# user's anonymous id, and the check also asks that every acknowledged
# merge holds (the person of anon-USER is USER).
#
# Needs: go. Prints the figures; exits non-zero when the check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
kills=${1:-100}
rate=${2:-20000}
shift $(( $# < 2 ? $# : 2 ))
tmp=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/spur" ./cmd/spur
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port/"
serve() {
  "$tmp/spur" --data "$tmp/data" serve --auth none --listen "127.0.0.1:$port" --debug-listen "" --flush-age 5s >>"$tmp/serve.log" 2>&1 &
  echo $! >"$tmp/serve.pid"
  for _ in $(seq 100); do
    curl -s -o /dev/null "$url/healthz" && return 0
    sleep 0.05
  done
  echo "kill9: the server did not start" >&2
  tail -20 "$tmp/serve.log" >&2
  exit 1
}
serve
# Each kill comes 0.5 to 2.5 s after the restart: the run lasts about
# 1.5 s per kill plus the restarts.
duration=$((kills * 2 + 10))
"$tmp/spur" loadgen --url "$url" --key none --app crash --rate "$rate" --duration "${duration}s" --batch 500 --gzip \
  --workers 8 --record "$tmp/record.json" --seed 7 --report 30s "$@" 2>"$tmp/loadgen.log" &
lg=$!
start=$(date +%s)
for i in $(seq "$kills"); do
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.5 + 2 * r / 32768 }')"
  kill -9 "$(cat "$tmp/serve.pid")"
  wait "$(cat "$tmp/serve.pid")" 2>/dev/null || true
  serve
done
wait $lg
echo "kill9: $kills kills in $(( $(date +%s) - start )) s"
tail -3 "$tmp/loadgen.log"
"$tmp/spur" loadgen --url "$url" --key none --app crash --check "$tmp/record.json"
kill -TERM "$(cat "$tmp/serve.pid")"
wait "$(cat "$tmp/serve.pid")" || true
# A reader of the store after a clean stop sees the same events.
echo '{"kind":"trend","app":"crash","range":{"from":"2000-01-01","to":"2100-01-01"},"interval":"month","series":[{"event":"$any"}]}' |
  "$tmp/spur" --data "$tmp/data" query --app crash --output csv - | awk -F, 'NR > 1 { s += $8 } END { print "kill9: the store holds " s " events" }'
