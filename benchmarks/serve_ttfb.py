"""``ragbridge serve``: time to first byte of a run's page, and its weight, for 10k samples.

Builds an SQLite store holding two runs of ``--samples`` samples (default 10,000) × ``--metrics``
metrics (default 8; a few failed and skipped cells), starts ``ragbridge serve`` on 127.0.0.1 as a
user would (a separate process, uvicorn), and times with a raw socket, from the request's first
byte sent to the response's first byte received:

* the run page cold (the first request after start: the run's cells are read from the store
  into the server's table) and warm (the median of ``--repeat`` later requests);
* one page of the sample table through the JSON API, sorted by a metric, filtered and searched;
* a sample's page, the trends page, and the comparison of the two runs (``compare`` with 10,000
  resamples on every metric: cold, then cached) unless ``--no-compare``.

Beside each wall time: the server process's CPU seconds (user + system from /proc) for that
request. Page weight: the HTML of the run page, the stylesheet and the script, raw and gzipped
(the app sends them uncompressed; a reverse proxy may compress). The load average is printed.

    python benchmarks/serve_ttfb.py
    python benchmarks/serve_ttfb.py --samples 2000 --repeat 3 --no-compare
"""

from __future__ import annotations

import argparse
import gzip
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]


def build(path: Path, samples: int, metrics: int) -> list[str]:
    """Two runs over the same samples; returns their ids (older first)."""
    from ragbridge.core.monitoring import RunRecord, ScoreCell, open_store

    ids = []
    with open_store(str(path)) as store:
        for k in range(2):
            run_id = f"bench{k}"
            cells = []
            for i in range(samples):
                for j in range(metrics):
                    if (i + j) % 197 == 0:
                        cell = ScoreCell(failure="timeout")
                    elif (i + j) % 211 == 0:
                        cell = ScoreCell(skipped=True)
                    else:
                        cell = ScoreCell(value=((i * 31 + j * 7 + k * (i % 3)) % 101) / 100)
                    cells.append((f"sample-{i:06d}", f"metric_{j}", cell))
            summary = {
                f"metric_{j}": {"mean": 0.5, "ci_low": 0.49, "ci_high": 0.51, "n_scored": samples}
                for j in range(metrics)
            }
            run = RunRecord(
                run_id=run_id,
                timestamp=1_800_000_000 + 3600 * k,
                command="eval",
                source="evals/bench.jsonl",
                summary=summary,
            )
            store.add_run(run, cells)
            ids.append(run_id)
    return ids


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch(port: int, target: str) -> tuple[float, bytes]:
    """(seconds to the first byte of the response, the whole body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        start = time.perf_counter()
        sock.sendall(request.encode())
        first = sock.recv(1)
        ttfb = time.perf_counter() - start
        chunks = [first]
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " not in status:
        raise RuntimeError(f"GET {target}: {status}")
    return ttfb, body


def timed(pid: int, port: int, target: str) -> tuple[float, float, bytes]:
    before = _cpu(pid)
    ttfb, body = fetch(port, target)
    time.sleep(0.05)  # let the server finish its bookkeeping before reading its CPU
    return ttfb, _cpu(pid) - before, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-compare", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite"
        t0 = time.perf_counter()
        base, cand = build(path, args.samples, args.metrics)
        print(
            f"store: 2 runs × {args.samples:,} samples × {args.metrics} metrics written in "
            f"{time.perf_counter() - t0:.1f} s ({path.stat().st_size / 1e6:.1f} MB)"
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        server = subprocess.Popen(
            [sys.executable, "-m", "ragbridge.adapters.cli", "serve", str(path), "--port",
             str(port)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("ragbridge serve did not start") from None
                    time.sleep(0.05)
            run_page = f"/run?{urlencode({'id': cand})}"
            rows: list[tuple[str, float, float]] = []
            ttfb, cpu, html = timed(server.pid, port, run_page)
            rows.append(("run page, cold (reads the run's cells)", ttfb, cpu))
            warm = [timed(server.pid, port, run_page) for _ in range(args.repeat)]
            rows.append(
                (
                    f"run page, warm (median of {args.repeat})",
                    statistics.median(w[0] for w in warm),
                    statistics.median(w[1] for w in warm),
                )
            )
            query = urlencode(
                {"run": cand, "sort": "metric_3", "desc": "1", "q": "sample-00",
                 "metric": "metric_1", "low": "0.2", "high": "0.9", "offset": "50"}
            )  # fmt: skip
            api = [timed(server.pid, port, f"/api/samples?{query}") for _ in range(args.repeat)]
            rows.append(
                (
                    "sample table page (API: sort+filter+search)",
                    statistics.median(a[0] for a in api),
                    statistics.median(a[1] for a in api),
                )
            )
            sample = f"/sample?{urlencode({'run': cand, 'id': 'sample-004321'})}"
            rows.append(("sample page", *timed(server.pid, port, sample)[:2]))
            rows.append(("trends page, cold", *timed(server.pid, port, "/trends")[:2]))
            if not args.no_compare:
                diff = f"/compare?{urlencode({'a': base, 'b': cand})}"
                rows.append(("compare page, cold (compare())", *timed(server.pid, port, diff)[:2]))
                rows.append(("compare page, cached", *timed(server.pid, port, diff)[:2]))
            _, _, css = timed(server.pid, port, "/static/serve.css")
            _, _, js = timed(server.pid, port, "/static/serve.js")
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"{'request':48} {'TTFB s':>9} {'server CPU s':>13}")
    for name, ttfb, cpu in rows:
        print(f"{name:48} {ttfb:9.3f} {cpu:13.2f}")
    print("page weight of the run page (first 50 rows):")
    for name, body in (("HTML", html), ("serve.css", css), ("serve.js", js)):
        packed = len(gzip.compress(body)) / 1024
        print(f"  {name:10} {len(body) / 1024:7.1f} KiB raw, {packed:6.1f} KiB gzip")
    total = len(html) + len(css) + len(js)
    print(f"  {'total':10} {total / 1024:7.1f} KiB raw")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
