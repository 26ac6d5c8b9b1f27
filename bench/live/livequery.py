#!/usr/bin/env python3
"""Query speed with live data (issue 17): the bench queries on an app with
N events unflushed in the server's live layer, against the same data once
flushed into segment files.

    bench/live/livequery.py STORE [--live 5000000] [--runs 5]

STORE holds app "bench" (`spur --data STORE gen --events 100000000 --app
bench`); it is copied first (the run adds the live events). The live events
come from `spur loadgen --time gen` (the generator's 2024 times: the same
range as the bench queries). Prints, per query of bench/queries, the median
server time (stats.wall_ms) with the events live and flushed, and the ratio.
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


def run_queries(port, runs):
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "bench", "queries"))):
        body = open(os.path.join(ROOT, "bench", "queries", name), "rb").read()
        times = []
        for i in range(runs + 1):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/apps/bench/query", data=body, method="POST")
            res = json.load(urllib.request.urlopen(req, timeout=600))
            if i > 0:  # the first run warms the caches
                times.append(res["stats"]["wall_ms"])
        out[name] = statistics.median(times)
        print(f"  {name}: {out[name]:.0f} ms", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--live", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="livequery-")
    try:
        spur = os.path.join(tmp, "spur")
        subprocess.run(["go", "build", "-o", spur, "./cmd/spur"], cwd=ROOT, check=True)
        data = os.path.join(tmp, "data")
        shutil.copytree(a.store, data)
        port = free_port()
        p = serve(spur, data, port, "16GiB")
        t0 = time.time()
        subprocess.run([spur, "loadgen", "--url", f"http://127.0.0.1:{port}/", "--key", "none", "--app", "bench",
                        "--events", str(a.live), "--duration", "0", "--time", "gen", "--gzip", "--batch", "1000",
                        "--seed", "99", "--report", "60s"], check=True)
        print(f"livequery: {a.live} live events sent in {time.time() - t0:.0f} s", file=sys.stderr)
        print("livequery: queries with the events live", file=sys.stderr)
        live = run_queries(port, a.runs)
        p.send_signal(signal.SIGTERM)  # the shutdown flushes the live layer
        p.wait()
        p = serve(spur, data, port, "16GiB")
        print("livequery: queries with the events flushed", file=sys.stderr)
        flushed = run_queries(port, a.runs)
        p.send_signal(signal.SIGTERM)
        p.wait()
        print(f"| query | {a.live:,} events live | flushed | live / flushed |")
        print("|---|---|---|---|")
        for name in live:
            print(f"| {name[:-5]} | {live[name]:.0f} ms | {flushed[name]:.0f} ms | {live[name] / max(flushed[name], 0.001):.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
