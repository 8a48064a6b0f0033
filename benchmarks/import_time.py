"""How long ``import ragbridge.core`` and ``ragbridge --help`` take in fresh interpreters.

    python benchmarks/import_time.py [--runs 15]

Targets: ``import ragbridge.core`` under 10 ms (names are exported lazily, PEP 562) and
``ragbridge --help`` at most 0.1 s of wall time, the console script's own start-up included.

Part 1 prints the median and min, timed inside the child interpreter (so its start-up is not
counted), of: the bare import, first use of `Sample` (pydantic), every core module (pydantic +
numpy + our code) and ``main(["--help"])`` of the command line. Part 2 prints the wall time of
whole processes, as a user sees it: ``python -c pass`` for scale, then ``ragbridge --help``,
``ragbridge --version`` and ``ragbridge eval --help``.

Children run with a warm bytecode cache of their own (``PYTHONPYCACHEPREFIX`` in a temporary
folder, one untimed run first), as an installed package has: with ``PYTHONDONTWRITEBYTECODE``
set and a stale ``__pycache__``, every run would recompile the sources and time the compiler.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "python -c pass (baseline)": "pass",
    "import ragbridge.core": "import ragbridge.core",
    "from ragbridge.core import Sample": "from ragbridge.core import Sample",
    "all core modules": (
        "import ragbridge.core as c\nfor n in c.__all__: getattr(c, n)\n"
        "import ragbridge.core.retrieval, ragbridge.core.results.stats"
    ),
    "main(['--help']) of the CLI": (
        "import contextlib, io\nfrom ragbridge.adapters.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])"
    ),
}

TIMER = "import time; t = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"

COMMANDS = (["--help"], ["--version"], ["eval", "--help"])


def child_env(cache: str) -> dict[str, str]:
    """The environment of every child: its own bytecode cache, written (see the docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def measure(code: str, runs: int, env: dict[str, str]) -> list[float]:
    out = []
    for i in range(runs + 1):
        done = subprocess.run(
            [sys.executable, "-c", TIMER.format(code=code)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        if i:  # the first run fills the bytecode cache
            out.append(float(done.stdout.strip().splitlines()[-1]) * 1000)
    return out


def wall(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Milliseconds from spawning ``argv`` to its exit, fresh process each time."""
    out = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        if i:
            out.append((time.perf_counter() - start) * 1000)
    return out


def console_script() -> list[str]:
    """The installed ``ragbridge`` script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "ragbridge"
    if script.exists():
        return [str(script)]
    found = shutil.which("ragbridge")
    return [found] if found else [sys.executable, "-m", "ragbridge.adapters.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"# python benchmarks/import_time.py --runs {args.runs}")
    print(f"# {sys.version.split()[0]}, warm bytecode cache, times in ms")
    with tempfile.TemporaryDirectory(prefix="ragbridge-pycache-") as cache:
        env = child_env(cache)
        print("\n## measured inside the child interpreter (start-up not counted)")
        print(f"{'what':<40} {'median':>8} {'min':>8}")
        for label, code in CASES.items():
            times = measure(code, args.runs, env)
            print(f"{label:<40} {statistics.median(times):8.1f} {min(times):8.1f}")
        script = console_script()
        print(f"\n## wall time of the whole process ({' '.join(script)})")
        print(f"{'what':<40} {'median':>8} {'min':>8}")
        rows = [("python -c pass", [sys.executable, "-c", "pass"])]
        rows += [(f"ragbridge {' '.join(argv)}", [*script, *argv]) for argv in COMMANDS]
        for label, command in rows:
            times = wall(command, args.runs, env)
            print(f"{label:<40} {statistics.median(times):8.1f} {min(times):8.1f}")


if __name__ == "__main__":
    main()
