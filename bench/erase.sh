#!/usr/bin/env bash
# Erasure at scale (issue 29, docs/storage.md §7). On a copy (hard links)
# of a store made by
#
#   spur gen --events 100000000 --seed 1 --persons 0.2 --app synth
#
# a running server erases PERSONS random persons (DELETE
# /api/apps/synth/persons/{id}, 4 at a time) while `spur loadgen` sends
# live events to the same app (at today's time, outside the generated
# range) and a loop runs the bench funnel. Checked: after the answers, the
# generated range holds exactly the events and persons less the erased
# ones' (counted beforehand through the person pages); after
# `spur compact --erase` the answers are the same, no file of the store
# holds an erased anonymous id (a byte search), `spur verify` passes.
# Printed: request times, funnel times before / while pending / after,
# the erasure's time and bytes rewritten against the app's size.
#
#   bench/erase.sh DATA [PERSONS=1000]
#
# Needs: go, curl, jq. Exits non-zero when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1
persons=${2:-1000}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spur-erase.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/spur" ./cmd/spur
spur=$tmp/spur
"$spur" --data "$src" backup --to "$tmp/bk" >/dev/null
"$spur" --data "$tmp/data" restore --from "$tmp/bk" >/dev/null
rm -rf "$tmp/bk"
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
"$spur" --data "$tmp/data" serve --auth none --listen "127.0.0.1:$port" --debug-listen "" >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 200); do curl -s -o /dev/null "$url/healthz" && break; sleep 0.1; done

query() { # query FILE → the result JSON
  curl -sf -X POST -H 'Content-Type: application/json' --data-binary @"$1" "$url/api/apps/synth/query"
}
cat >"$tmp/count.json" <<'EOF'
{"kind": "trend", "range": {"from": "2024-01-01", "to": "2024-04-01"}, "tz": "UTC", "interval": "month",
 "series": [{"event": "$any"}, {"event": "$any", "math": "users"}]}
EOF
counts() { query "$tmp/count.json" | jq -r '[.series[0].total, .series[1].total] | @tsv'; }
funnel_ms() { # median wall ms of N funnel runs
  for _ in $(seq "$1"); do query bench/queries/funnel4.json | jq .stats.wall_ms; done | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# Persons to erase: random user ids of the generator ("u" and digits),
# each with its person's distinct ids and events.
users=$(query "$tmp/count.json" | jq '.series[1].total')
: >"$tmp/ids"
: >"$tmp/anon"
total=0
while read -r id; do
  page=$(curl -sf "$url/api/apps/synth/persons/$id/events?limit=1")
  n=$(jq .total <<<"$page")
  [ "$n" -gt 0 ] || continue
  echo "$id" >>"$tmp/ids"
  total=$((total + n))
  jq -r '.distinct_ids[] | select(startswith("anon-"))' <<<"$page" >>"$tmp/anon"
  [ "$(wc -l <"$tmp/ids")" -lt "$persons" ] || break
done < <(awk -v u="$users" 'BEGIN { srand(29); while (c < 4 * u) { i = int(rand() * u); if (!(i in s)) { s[i]; c++; print "u" i } } }')
read -r ev0 us0 < <(counts)
echo "erase: $persons persons ($(wc -l <"$tmp/anon") anonymous ids) with $total events, of $ev0 events and $us0 persons in the generated range"
before=$(funnel_ms 5)

"$spur" loadgen --url "$url/" --key none --app synth --rate 20000 --duration 10m --batch 1000 --gzip --workers 4 --time now --report 1h \
  >"$tmp/loadgen.log" 2>&1 &
loadgen=$!
( n=0; while :; do query bench/queries/funnel4.json >/dev/null || echo "erase: a funnel query failed" >&2; n=$((n + 1)); echo $n >"$tmp/loops"; done ) &
loop=$!
sleep 2
start=$(date +%s.%N)
xargs -P 4 -I{} curl -sf -o /dev/null -w '%{time_total}\n' -X DELETE "$url/api/apps/synth/persons/{}" <"$tmp/ids" >"$tmp/times"
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
sort -n "$tmp/times" | awk -v e="$elapsed" '{ a[NR] = $1 } END { printf "erase: %d requests in %.1f s under load; answer p50 %.1f ms, p99 %.1f ms\n", NR, e, 1000 * a[int(NR / 2)], 1000 * a[int(NR * 0.99)] }'
read -r ev1 us1 < <(counts)
kill $loop 2>/dev/null || true
wait $loop 2>/dev/null || true
echo "erase: $(cat "$tmp/loops" 2>/dev/null || echo 0) funnel queries ran meanwhile"
pending=$(funnel_ms 5)
kill -INT $loadgen 2>/dev/null || true
wait $loadgen || true
grep -E 'accepted|events/s' "$tmp/loadgen.log" | tail -1 || true
fail=0
if [ "$ev1" -ne $((ev0 - total)) ] || [ "$us1" -ne $((us0 - persons)) ]; then
  echo "erase: FAIL: after the answers $ev1 events, $us1 persons; want $((ev0 - total)), $((us0 - persons))"
  fail=1
fi
curl -s "$url/api/apps/synth/deletions" | jq -r '.deletions | group_by(.status) | map("\(.[0].status): \(length)") | join(", ")' | sed 's/^/erase: requests /'
kill -TERM $server; wait $server || true

/usr/bin/time -f '%e s, %M KiB peak' "$spur" --data "$tmp/data" compact --app synth --erase 2>"$tmp/time" | sed 's/^/erase: /'
echo "erase: spur compact --erase took $(cat "$tmp/time")"
if grep -rlF -f "$tmp/anon" "$tmp/data" >"$tmp/found"; then
  echo "erase: FAIL: erased ids still in $(wc -l <"$tmp/found") files: $(head -3 "$tmp/found" | tr '\n' ' ')"
  fail=1
fi
"$spur" --data "$tmp/data" verify --app synth | tail -1 | sed 's/^/erase: /'
"$spur" --data "$tmp/data" serve --auth none --listen "127.0.0.1:$port" --debug-listen "" >>"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 200); do curl -s -o /dev/null "$url/healthz" && break; sleep 0.1; done
read -r ev2 us2 < <(counts)
after=$(funnel_ms 5)
if [ "$ev2" -ne "$ev1" ] || [ "$us2" -ne "$us1" ]; then
  echo "erase: FAIL: after compact --erase $ev2 events, $us2 persons; want $ev1, $us1"
  fail=1
fi
echo "erase: funnel4 median of 5: ${before} ms before, ${pending} ms while the requests are pending, ${after} ms after compact --erase"
exit $fail
