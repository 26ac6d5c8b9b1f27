#!/usr/bin/env bash
# bench/compare.sh BASE HEAD — the benchmark regression alarm.
#
# Runs the hot-path Go benchmarks (segment decode, trail scan, row filters, funnel,
# retention and trend kernels) on two commits, 6 runs each, interleaved so
# that machine noise hits both alike, and compares them with benchstat. It
# exits 1 when any benchmark is ≥ 10 % slower (sec/op, statistically
# significant per benchstat, p < 0.05) or allocates more (allocs/op) on HEAD.
#
#   bench/compare.sh main HEAD
#   COUNT=10 BENCH='BenchmarkScan' bench/compare.sh v0.1.0 my-branch
set -euo pipefail
base=${1:?usage: bench/compare.sh BASE HEAD}
head=${2:-HEAD}
count=${COUNT:-6}
bench=${BENCH:-'BenchmarkReadBlock|BenchmarkScan|BenchmarkFilterDeltas|BenchmarkFunnel|BenchmarkRetention|BenchmarkTrend'}
pkgs=${PKGS:-./storage/... ./query/analysis/}
threshold=${THRESHOLD:-10}

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true;
      git -C "$root" worktree remove --force "$work/head" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
git -C "$root" worktree add -q --detach "$work/head" "$head"

benchstat=$(go env GOPATH)/bin/benchstat
[ -x "$benchstat" ] || go install golang.org/x/perf/cmd/benchstat@latest

for side in base head; do
  (cd "$work/$side" && go test -run '^$' -bench "$bench" -count 1 $pkgs >/dev/null) # build and warm caches
done
for i in $(seq "$count"); do
  for side in base head; do
    (cd "$work/$side" && go test -run '^$' -bench "$bench" -benchmem -count 1 $pkgs) | grep '^Benchmark' >>"$work/$side.txt"
  done
done

"$benchstat" "$work/base.txt" "$work/head.txt" | tee "$work/cmp.txt"

# A benchstat delta row reads "name  base ± x%  head ± y%  +12.34% (p=0.002 n=6)".
bad=$(awk -v thr="$threshold" '
  # Unit headers ("│ sec/op │ …") come before the skip of the other
  # "│" header lines: skipped first, the unit never changed and no row was
  # ever flagged.
  /sec\/op/ { unit = "time"; next }
  /allocs\/op/ { unit = "allocs"; next }
  /B\/op/ { unit = "bytes"; next }
  /Mevents\/|rows\/|events\// { unit = "rate"; next }
  /^[[:space:]]*│/ || /^$/ || /^geomean/ { next }
  {
    for (i = 1; i <= NF; i++) if ($i ~ /^[+-][0-9.]+%$/) {
      d = $i; sub(/%/, "", d); d += 0
      if ((unit == "time" && d >= thr) || (unit == "allocs" && d > 0)) print unit ": " $0
    }
  }' "$work/cmp.txt")
if [ -n "$bad" ]; then
  echo
  echo "REGRESSION (≥ ${threshold}% slower or more allocations on $head than $base):"
  echo "$bad"
  exit 1
fi
echo
echo "no regression ≥ ${threshold}% between $base and $head"
