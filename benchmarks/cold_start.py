"""Start-up cost of the CLI's fast paths against importing litellm, measured in the same run.

    python benchmarks/cold_start.py [--runs 7]

Prints the median wall time and peak memory (max RSS) of `route --help` and
`route --explain "..."` next to `python -c "import litellm"`, and the ratios. Target: < 0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Prove that there are infinitely many primes, then give a Python function that lists the first n."


def _route_command() -> list[str]:
    script = Path(sys.executable).with_name("route")
    return [str(script)] if script.exists() else [sys.executable, "-m", "router.cli"]


def measure(command: list[str], runs: int, env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Median wall seconds and median peak RSS in MiB over `runs` runs (after one warm-up)."""
    walls, peaks = [], []
    for index in range(runs + 1):
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{command} failed with status {status}")
        if index:  # the first run warms the OS file cache
            walls.append(wall)
            peaks.append(usage.ru_maxrss / 1024)  # KiB on Linux
    return statistics.median(walls), statistics.median(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with tempfile.TemporaryDirectory() as home:
        env["ROUTE_HOME"] = home  # the embedded default config, no user files
        route = _route_command()
        cases = {
            "import litellm (baseline)": [sys.executable, "-c", "import litellm"],
            "route --help": [*route, "--help"],
            "route --explain": [*route, "--explain", PROMPT],
            "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        }
        results = {name: measure(cmd, args.runs, env, home) for name, cmd in cases.items()}
    base_wall, base_peak = results["import litellm (baseline)"]
    print(f"{'command':<36} {'wall s':>8} {'peak MiB':>9} {'wall ratio':>11} {'mem ratio':>10}")
    for name, (wall, peak) in results.items():
        print(f"{name:<36} {wall:>8.3f} {peak:>9.1f} {wall / base_wall:>11.3f} {peak / base_peak:>10.3f}")
    worst = max(results["route --help"][0], results["route --explain"][0]) / base_wall
    verdict = "meets" if worst < 0.1 else "MISSES"
    print(f"\nworst route/litellm wall ratio: {worst:.3f} ({verdict} the < 0.1 target); runs per command: {args.runs}")


if __name__ == "__main__":
    main()
