#!/usr/bin/env python3
"""Query speed with live data (issue 17): the bench queries on an app with
N events unflushed in the server's live layer, against the same data once
flushed into segment files.

    bench/live/livequery.py STORE [--live 5000000] [--runs 5]

STORE holds app "bench" (`spur --data STORE gen --events 100000000 --app
bench`); it is copied first (the run adds the live events). Unless
--no-settle, the queries start once the live layer has merged its in-memory
segments (about a second after ingestion pauses, plus the merge). The live events
come from `spur loadgen --time gen` (the generator's 2024 times: the same
range as the bench queries). Two servers run side by side: one on a copy
that was sent the same events and then stopped and started again (its
shutdown flushes them into segment files), one on a copy holding them live;
each query runs on both in turn. Prints, per query of bench/queries, the
median server time (stats.wall_ms) with the events live and flushed, and
the ratio.
"""
import argparse, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def serve(spur, data, port, live_memory):
    args = [spur, "--data", data, "serve", "--auth", "none", "--listen", f"127.0.0.1:{port}", "--debug-listen", "",
            "--ingest-memory", live_memory, "--flush-bytes", live_memory, "--flush-age", "24h",
            "--shutdown-timeout", "10m", "--query-timeout", "10m"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit("livequery: the server did not start")


def memory_segments(port):
    for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode().splitlines():
        if line.startswith('spur_live_memory_segments{app="bench"}'):
            return int(float(line.split()[-1]))
    return 0


def settle(port, shards):
    """Waits until the live layer holds one in-memory segment per shard and
    kind: a second after ingestion pauses, the server merges each shard's
    in-memory segments into one (storage/live.go, maintain); the count
    drops when the whole merge is published."""
    t0 = time.time()
    n = memory_segments(port)
    while n > 2 * shards and time.time() - t0 < 300:
        time.sleep(0.5)
        n = memory_segments(port)
    print(f"livequery: {n} in-memory segments {time.time() - t0:.1f} s after the last acknowledgement", file=sys.stderr)


def query(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/apps/bench/query", data=body, method="POST")
    return json.load(urllib.request.urlopen(req, timeout=600))["stats"]["wall_ms"]


def run_queries(live_port, flushed_port, runs):
    """Runs each query on both servers in turn (a warm-up each, then runs
    alternating), so that the machine's drift hits both alike."""
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "bench", "queries"))):
        body = open(os.path.join(ROOT, "bench", "queries", name), "rb").read()
        query(live_port, body)
        query(flushed_port, body)
        live, flushed = [], []
        for _ in range(runs):
            live.append(query(live_port, body))
            flushed.append(query(flushed_port, body))
        out[name] = (statistics.median(live), statistics.median(flushed))
        print(f"  {name}: {out[name][0]:.0f} ms live, {out[name][1]:.0f} ms flushed", file=sys.stderr)
    return out


def send(spur, port, n):
    t0 = time.time()
    subprocess.run([spur, "loadgen", "--url", f"http://127.0.0.1:{port}/", "--key", "none", "--app", "bench",
                    "--events", str(n), "--duration", "0", "--time", "gen", "--gzip", "--batch", "1000",
                    "--seed", "99", "--report", "60s"], check=True)
    print(f"livequery: {n} live events sent in {time.time() - t0:.0f} s", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--live", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shards", type=int, default=16, help="the app's shards (spur gen's default)")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="query at once after the last acknowledgement, while the live layer still merges")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="livequery-")
    procs = []
    try:
        spur = os.path.join(tmp, "spur")
        subprocess.run(["go", "build", "-o", spur, "./cmd/spur"], cwd=ROOT, check=True)
        def started(name):
            """A copy of STORE and a server on it, sent the live events."""
            data, port = os.path.join(tmp, name), free_port()
            shutil.copytree(a.store, data)
            procs.append(serve(spur, data, port, "16GiB"))
            send(spur, port, a.live)
            return data, port

        # The flushed copy: the server stopped (its shutdown flushes the
        # live layer) and started again.
        fdata, fport = started("flushed")
        f = procs.pop()
        f.send_signal(signal.SIGTERM)
        f.wait()
        procs.append(serve(spur, fdata, fport, "16GiB"))
        # The live copy, beside it.
        _, lport = started("live")
        if a.settle:
            settle(lport, a.shards)
        print("livequery: each query on the live and the flushed server in turn", file=sys.stderr)
        res = run_queries(lport, fport, a.runs)
        print(f"| query | {a.live:,} events live | flushed | live / flushed |")
        print("|---|---|---|---|")
        for name, (lv, fl) in res.items():
            print(f"| {name[:-5]} | {lv:.0f} ms | {fl:.0f} ms | {lv / max(fl, 0.001):.2f} |")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
