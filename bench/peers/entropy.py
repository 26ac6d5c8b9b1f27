"""Order-0 empirical entropy of the columns every Spur scan decodes per row.

    python bench/peers/entropy.py --parquet ev100m.parquet

Reads the benchmark Parquet (user_id, timestamp, event, ...) with DuckDB,
orders each user's events by time as Spur stores them, and prints, in bits:

- H(delta): the millisecond gap between consecutive events of a user;
  H(delta | event) and H(delta | event, previous event): the same given
  the row's event name and the previous one's (what a context model could
  use);
- H(event) and H(event | previous event);
- log2 of the time span in ms: the cost of a user's first time, uniform;
- H(rows per user).

An ideal arithmetic coder of each value by itself (order 0) reaches the
empirical entropy, so these bound what any such coding of the columns can
save; docs/performance.md ("Why the misses", bytes) uses them. Not run in
CI: it needs the generated Parquet and DuckDB from PyPI (about 100 s and
8 GB of memory at 100M events on 2 cores).
"""

import argparse
import math
import time

import duckdb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parquet", required=True, help="benchmark events (spur gen --format parquet)")
    ap.add_argument("--memory", default="16GB", help="DuckDB memory_limit")
    args = ap.parse_args()

    c = duckdb.connect()
    c.sql(f"SET memory_limit='{args.memory}'")
    t0 = time.time()
    c.sql(
        f"""CREATE TABLE d AS SELECT user_id, epoch_ms(timestamp) AS t, event,
        row_number() OVER w AS rn,
        epoch_ms(timestamp) - lag(epoch_ms(timestamp)) OVER w AS dt,
        lag(event) OVER w AS pe
        FROM read_parquet('{args.parquet}')
        WINDOW w AS (PARTITION BY user_id ORDER BY timestamp)"""
    )

    def one(q):
        return c.sql(q).fetchall()[0]

    def entropy(groups):
        """Entropy in bits per row of the grouping whose counts groups selects."""
        s, m = one(f"SELECT sum(cnt * log2(cnt)), sum(cnt) FROM ({groups})")
        return (m * math.log2(m) - s) / m, m

    def conditional(joint, context):
        """H(X | Y) = H(X, Y) - H(Y)."""
        return entropy(joint)[0] - entropy(context)[0]

    rows = one("SELECT count(*) FROM d")[0]
    hd, later = entropy("SELECT count(*) cnt FROM d WHERE rn > 1 GROUP BY dt")
    print(f"rows {rows}; rows after a user's first {later}: H(delta ms) = {hd:.3f} bits")
    h = conditional("SELECT count(*) cnt FROM d WHERE rn > 1 GROUP BY dt, event",
                    "SELECT count(*) cnt FROM d WHERE rn > 1 GROUP BY event")
    print(f"H(delta | event) = {h:.3f} bits")
    h = conditional("SELECT count(*) cnt FROM d WHERE rn > 1 GROUP BY dt, event, pe",
                    "SELECT count(*) cnt FROM d WHERE rn > 1 GROUP BY event, pe")
    print(f"H(delta | event, previous event) = {h:.3f} bits")
    print(f"H(event) = {entropy('SELECT count(*) cnt FROM d GROUP BY event')[0]:.3f} bits")
    h = conditional("SELECT count(*) cnt FROM d GROUP BY event, pe", "SELECT count(*) cnt FROM d GROUP BY pe")
    print(f"H(event | previous event) = {h:.3f} bits")
    users = one("SELECT count(DISTINCT user_id) FROM d")[0]
    span = one("SELECT max(t) - min(t) FROM d")[0]
    print(f"users {users}; a first time: log2(span ms) = {math.log2(span):.2f} bits")
    h = entropy("SELECT count(*) cnt FROM (SELECT count(*) k FROM d GROUP BY user_id) GROUP BY k")[0]
    print(f"H(rows per user) = {h:.3f} bits")
    print(f"took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
