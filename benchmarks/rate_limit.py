"""Three runs on one key against a provider's rate limit: today's fixed cap against the limiter.

    python benchmarks/rate_limit.py                    # both modes, 60 s each (~2.5 min)
    python benchmarks/rate_limit.py --only limiter     # one mode
    python benchmarks/rate_limit.py --seconds 30 --scale 0.125   # quicker, shorter window
    python benchmarks/rate_limit.py --shared redis     # 3 "machines": apart, then through Redis

The issue's setting is a server enforcing 600 requests and 200,000 tokens per minute, with
OpenAI's ``x-ratelimit-*`` headers, and 3 concurrent runs (processes) on one key. To finish in a
few minutes the *window* is scaled, not the rates: with ``--scale 0.25`` (default) the window is
15 s and the limits 150 requests and 50,000 tokens per window, the same 10 requests/s and
3,333 tokens/s as 600 RPM / 200k TPM; the limiter is told the same window
(``RateLimits(window=15)``), since headers do not say it. A 60 s run is four windows.

The server is `tests/fake_openai.py` on 127.0.0.1 (sliding-window enforcement, 429 with the
``Retry-After`` that would make the request fit), answering after ``--latency`` seconds. Each
call is ~900 prompt tokens (3,600 characters) + ~150 completion tokens, so the token budget
binds (~3.2 calls/s), as it does at scale. Each run is a separate process with a
`JudgeEngine(max_concurrency=16)` over an OpenAI-compatible judge, sending distinct requests
(no cache) as fast as its engine lets it until the time is up.

* **fixed cap** (today: no limiter, 16 in flight per run, the engine's retries honouring
  ``Retry-After``): 429s, calls that failed after their retries, and idle time. A run whose
  breaker trips (5 calls in a row that spent their retries on 429s) stops sending: it is shown.
* **limiter** (``Settings(rate_limits=RateLimits(window=W))``: budgets learned from the
  headers, one ledger shared by the three runs).

With ``--shared redis`` the three runs are three *machines*: each has its own temporary
directory, so no ledger file joins them (a local ``redis-server`` is started on 127.0.0.1, as the
test suite does, `tests/redis_server.py`):

* **apart** (the limiter with each machine's own ledger: what a cluster had before the ledger
  could be shared): each machine learns the whole budget and spends it;
* **redis** (``RateLimits(window=W, shared="redis://...")``: one ledger on the server).

Printed per mode, all counted on the server: 429s in total and after the first 429 window (the
window that starts at the first 429; ``over the limit after`` is the issue's "0 requests over
the limit"), the share of the limit used in steady state (admitted tokens, and requests, from the
end of that first window to the end of the run, over what the limit allows in that time),
idle time (the 1-second intervals of the run in which the server admitted no request: at the
limit's pace it admits ~3 a second), tokens admitted per window (windows aligned on the runs'
start), and per run the calls that succeeded and failed. The fake server's ``Retry-After`` is
exact (the moment the request would fit), kinder than a real provider's: with the fixed cap the
refused calls all retry at that instant, so its admissions come in bursts at window boundaries
(hence its idle seconds), and its steady share depends on where the first 429 falls against them;
read it with its tokens per window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = 3
PROMPT_CHARS = 3600
REPLY = "The answer is supported by the context. " * 15  # ~600 characters, ~150 tokens


def _child(args: argparse.Namespace) -> None:
    """One run: send distinct requests until the deadline; print what happened as JSON."""
    from ragbridge.adapters.openai import OpenAIJudge
    from ragbridge.core.judging.engine import JudgeEngine
    from ragbridge.core.judging.ratelimit import RateLimits

    limits = None
    if args.mode in ("limiter", "apart"):
        limits = RateLimits(window=args.window, directory=args.ledger)
    elif args.mode == "redis":
        limits = RateLimits(window=args.window, directory=args.ledger, shared=args.ledger_url)

    async def main() -> dict[str, Any]:
        judge = OpenAIJudge("gpt-fake", base_url=args.base_url, api_key="one-key")
        engine = JudgeEngine(
            judge, max_concurrency=args.concurrency, timeout=30, rate_limits=limits
        )
        deadline = args.start + args.seconds
        counter = iter(range(10**9))
        ok = failed = 0
        failures: dict[str, int] = {}

        async def worker() -> None:
            nonlocal ok, failed
            while time.time() < deadline:
                i = next(counter)
                text = f"run {args.index} request {i}: " + "word " * (PROMPT_CHARS // 5)
                call = await engine.complete(
                    [{"role": "user", "content": text}], template_id="bench", template_version="1"
                )
                if call.ok:
                    ok += 1
                else:
                    failed += 1
                    assert call.failure is not None
                    kind = call.failure.kind.value
                    failures[kind] = failures.get(kind, 0) + 1
                    if engine.breaker.tripped:  # the run stops: no more calls are sent
                        return

        delay = args.start - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        workers = [asyncio.ensure_future(worker()) for _ in range(args.concurrency * 2)]
        await asyncio.wait(workers, timeout=max(0.0, deadline - time.time()))
        for task in workers:  # calls still waiting or in flight at the deadline: not counted
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await judge.aclose()
        limiter = engine.limiter
        return {
            "ok": ok,
            "failed": failed,
            "failures": failures,
            "retries": engine.stats.retries,
            "stopped by the breaker": engine.breaker.line,
            "waited": round(limiter.waited, 1) if limiter else None,
        }

    print("ready", flush=True)
    args.start = float(sys.stdin.readline())  # when every run is ready
    print(json.dumps(asyncio.run(main())))


def _machine_env(mode: str, ledger: str, index: int) -> dict[str, str] | None:
    """A "machine" of its own (apart, redis): its own temporary directory; else inherited."""
    if mode not in ("apart", "redis"):
        return None
    own = Path(ledger) / f"machine-{index}"
    own.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(own)}


def _measure(mode: str, args: argparse.Namespace, ledger_url: str = "") -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_openai import FakeOpenAI

    window = 60.0 * args.scale
    rpm, tpm = round(600 * args.scale), round(200_000 * args.scale)
    with (
        FakeOpenAI(
            answer=lambda _: REPLY,
            rpm=rpm,
            tpm=tpm,
            window=window,
            rate_headers=True,
            delay=args.latency,
        ) as server,
        tempfile.TemporaryDirectory() as ledger,
    ):
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    "--mode",
                    mode,
                    "--index",
                    str(i),
                    "--base-url",
                    server.base_url,
                    "--seconds",
                    str(args.seconds),
                    "--window",
                    str(window),
                    "--ledger",
                    ledger if mode == "limiter" else str(Path(ledger) / f"machine-{i}"),
                    "--ledger-url",
                    ledger_url,
                    "--concurrency",
                    str(args.concurrency),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_machine_env(mode, ledger, i),
            )
            for i in range(RUNS)
        ]
        for child in children:  # every run has imported ragbridge (seconds on a loaded machine)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        start_wall = time.time() + 0.5
        start_mono = time.monotonic() + 0.5
        for child in children:
            assert child.stdin is not None
            child.stdin.write(f"{start_wall!r}\n")
            child.stdin.flush()
        runs = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
        admitted = list(server.admitted)
        limited = sorted(server.limited_at)
    end = start_mono + args.seconds
    first = limited[0] if limited else start_mono
    steady_from = max(first, start_mono) + window
    span = max(end - steady_from, 1e-9)
    steady = [(t, n) for t, n, _ in admitted if steady_from <= t < end]
    arrivals = {int(t - start_mono) for t, _, _ in admitted if start_mono <= t < end}
    return {
        "mode": mode,
        "limits": f"{rpm} requests / {tpm} tokens per {window:g} s",
        "429s": len(limited),
        "429s after the first 429 window": sum(1 for t in limited if t >= first + window),
        "steady share of tokens": round(sum(n for _, n in steady) / (tpm * span / window), 3),
        "steady share of requests": round(len(steady) / (rpm * span / window), 3),
        "steady seconds": round(span, 1),
        "idle seconds": int(args.seconds) - len(arrivals),
        "admitted": len(admitted),
        "tokens per window": [
            sum(n for t, n, _ in admitted if lo <= t < lo + window)
            for lo in (start_mono + k * window for k in range(int(args.seconds // window)))
        ],
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["fixed", "limiter", "apart", "redis"])
    parser.add_argument(
        "--shared",
        choices=["machine", "redis"],
        default="machine",
        help="machine: 3 runs on one machine (fixed cap vs limiter); redis: 3 machines, each "
        "its own ledger vs one ledger on a Redis server",
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scale", type=float, default=0.25, help="window = 60 s x scale")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="limiter", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--window", type=float, default=60.0, help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--ledger-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if args.shared == "redis":
        sys.path.insert(0, str(ROOT / "tests"))
        from redis_server import redis_server

        with redis_server() as url:
            for mode in ("apart", "redis"):
                if args.only in (None, mode):
                    print(json.dumps(_measure(mode, args, url), indent=1), flush=True)
        return
    for mode in ("fixed", "limiter"):
        if args.only in (None, mode):
            print(json.dumps(_measure(mode, args), indent=1), flush=True)


if __name__ == "__main__":
    main()
