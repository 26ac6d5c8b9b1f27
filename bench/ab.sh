#!/usr/bin/env bash
# bench/ab.sh QUERY ROUNDS BIN... — an A/B of spur binaries on one query
# that survives a drifting machine.
#
# Each round runs `BIN --data $DATA bench-query --app $APP --runs $RUNS`
# (one warm-up, then RUNS timed runs, in a new process) for every binary,
# one after the other. It prints, per binary, the median and fastest wall
# and CPU time per run over all rounds, and the median over rounds of the
# ratio of its round median to the first binary's. On a VM whose speed
# moves by tens of percent from minute to minute, plain medians of runs
# taken minutes apart mostly measure the machine; the per-round ratio
# compares runs taken seconds apart, and the order of the binaries
# rotates so that none always runs after another.
#
#   go build -o /tmp/base ./cmd/spur   # at the base commit
#   go build -o /tmp/head ./cmd/spur   # at the change
#   DATA=/tmp/s100 APP=synth bench/ab.sh funnel4 6 /tmp/base /tmp/head
#
# QUERY is a file or a name under bench/queries/. Defaults: DATA=./spur-data,
# APP=bench, RUNS=3. Not run in CI (it needs a generated app).
set -euo pipefail
query=${1:?usage: bench/ab.sh QUERY ROUNDS BIN...}
rounds=${2:?usage: bench/ab.sh QUERY ROUNDS BIN...}
shift 2
[ $# -ge 1 ] || { echo "usage: bench/ab.sh QUERY ROUNDS BIN..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$query" ] || query=$root/bench/queries/$query.json
[ -f "$query" ] || { echo "bench/ab.sh: no query file $query" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
bins=("$@")
for r in $(seq "$rounds"); do
  # The order rotates from round to round: the binary that runs second
  # ran 2 % slower than the same binary run first (ten rounds, funnel4).
  for i in $(seq 0 $(($# - 1))); do
    bin=${bins[$(((i + r - 1) % $#))]}
    # bench-query prints one JSON object last: runs_ms, runs_cpu_ms, …
    json=$("$bin" --data "${DATA:-./spur-data}" bench-query --app "${APP:-bench}" --runs "${RUNS:-3}" "$query" | tail -n 1)
    printf '%s\t%s\t%s\n' "$r" "$bin" "$json" >>"$out"
  done
done

python3 - "$out" "$@" <<'PY'
import json, statistics as st, sys
rows = [line.rstrip("\n").split("\t", 2) for line in open(sys.argv[1])]
bins = sys.argv[2:]
res = {}  # (round, bin) -> (wall runs, cpu runs)
for rnd, b, js in rows:
    d = json.loads(js)
    res[(rnd, b)] = (d["runs_ms"], d.get("runs_cpu_ms") or [])
rounds = sorted({r for r, _ in res}, key=int)
for b in bins:
    wall = [x for r in rounds for x in res[(r, b)][0]]
    cpu = [x for r in rounds for x in res[(r, b)][1]]
    wr = [st.median(res[(r, b)][0]) / st.median(res[(r, bins[0])][0]) for r in rounds]
    line = f"{b}: wall median {st.median(wall):.0f} ms (fastest {min(wall):.0f})"
    if cpu:
        cr = [st.median(res[(r, b)][1]) / st.median(res[(r, bins[0])][1]) for r in rounds]
        line += f", CPU median {st.median(cpu):.0f} ms; against {bins[0]}: wall x{st.median(wr):.3f}, CPU x{st.median(cr):.3f}"
    else:
        line += f"; against {bins[0]}: wall x{st.median(wr):.3f}"
    print(line + f" ({len(rounds)} rounds)")
PY
