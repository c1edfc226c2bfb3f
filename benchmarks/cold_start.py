"""Start-up cost of the CLI's fast paths against importing litellm, measured in the same run.

    python benchmarks/cold_start.py [--runs 7]

Prints the median wall time and peak memory (max RSS) of `route --help` and
`route --explain "..."` next to `python -c "import litellm"`, and the ratios. Target: < 0.1.

Then one real request from a fresh process through each shipped backend kind (openai, anthropic,
litellm), against the simulator on loopback with zero-delay answers, so what is timed is start-up
plus one request; the baseline is a bare `litellm.completion` one-shot. Targets: the `frontier`
backend (kind anthropic) under 0.6 s, and under 0.1 of the one-shot (issue 39: a ratio, since
absolute seconds move with the machine). Exits 1 when a target is missed.

Last, what ending without the interpreter's teardown saves (router/cli/startup.py): the same
frontier request through `router.cli.main` (the teardown kept) and `router.cli.program` (the
`route` program: skipped), both started by `python -c`. Printed, not a target.
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

from backends.simulator import SimServer

# The two entry points of router/cli/__init__.py, by case name.
TEARDOWN = {"router.cli.main (teardown kept)": "main", "router.cli.program (teardown skipped)": "program"}
PROMPT = "Prove that there are infinitely many primes, then give a Python function that lists the first n."


def _route_command() -> list[str]:
    script = Path(sys.executable).with_name("route")
    return [str(script)] if script.exists() else [sys.executable, "-m", "router.cli"]


def measure(command: list[str], runs: int, env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """Median wall seconds, median peak RSS in MiB and median CPU seconds (user + system: what a
    busy machine does not inflate) over `runs` runs (after one warm-up)."""
    walls, peaks, cpus = [], [], []
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
            cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls), statistics.median(peaks), statistics.median(cpus)


def _request_config(base_url: str) -> str:
    """The shipped backends' kinds, pointed at the simulator."""
    return f"""\
backends:
  diffusiongemma: {{kind: openai, model: sim-diffusion, base_url: "{base_url}", decoding: diffusion}}
  frontier: {{kind: anthropic, model: sim-claude, base_url: "{base_url}", api_key: "${{ANTHROPIC_API_KEY}}"}}
  long-tail: {{kind: litellm, model: openai/sim-other, base_url: "{base_url}", api_key: "${{ANTHROPIC_API_KEY}}"}}
routing:
  scorer: {{kind: length}}
  tiers: [{{name: all, backends: [diffusiongemma]}}]
"""


def request_cases(route: list[str], base_url: str, home: str) -> dict[str, list[str]]:
    config = Path(home) / "requests.yaml"
    config.write_text(_request_config(base_url))
    one_shot = (f"import litellm; litellm.completion(model='openai/sim-other', api_base={base_url!r}, "
                "api_key='sk-sim', messages=[{'role': 'user', 'content': 'hi'}], max_tokens=8)")
    cases = {"litellm.completion one-shot (baseline)": [sys.executable, "-c", one_shot]}
    args = ["-c", str(config), "--no-log", "--no-stream", "--max-tokens", "8", "-m"]
    for name, kind in (("diffusiongemma", "openai"), ("frontier", "anthropic"), ("long-tail", "litellm")):
        cases[f"route -m {name} ({kind})"] = [*route, *args, name, "hi"]
    for case, entry in TEARDOWN.items():
        cases[case] = [sys.executable, "-c", f"from router.cli import {entry}; {entry}()", *args, "frontier", "hi"]
    return cases


def _table(results: dict[str, tuple[float, float, float]], baseline: str) -> None:
    base_wall, base_peak, base_cpu = results[baseline]
    print(f"{'command':<40} {'wall s':>8} {'peak MiB':>9} {'wall ratio':>11} {'mem ratio':>10} {'CPU s':>7} "
          f"{'CPU ratio':>10}")
    for name, (wall, peak, cpu) in results.items():
        print(f"{name:<40} {wall:>8.3f} {peak:>9.1f} {wall / base_wall:>11.3f} {peak / base_peak:>10.3f} {cpu:>7.3f} "
              f"{cpu / base_cpu:>10.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with tempfile.TemporaryDirectory() as home:
        env["ROUTE_HOME"] = home  # the embedded default config, no user files
        # Bytecode as an installed package has it (pip compiles it at install; litellm's is in
        # site-packages): written by each command's warm-up run, under the temporary directory,
        # even where the environment says not to write it (PYTHONDONTWRITEBYTECODE, as in CI).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(home) / "pycache")
        route = _route_command()
        cases = {
            "import litellm (baseline)": [sys.executable, "-c", "import litellm"],
            "route --help": [*route, "--help"],
            "route --explain": [*route, "--explain", PROMPT],
            "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        }
        results = {name: measure(cmd, args.runs, env, home) for name, cmd in cases.items()}
        env["ANTHROPIC_API_KEY"] = "sk-sim"
        with SimServer(profiles={}) as sim:  # every model answers at once: start-up is what is timed
            requests = {name: measure(cmd, args.runs, env, home)
                        for name, cmd in request_cases(route, sim.base_url, home).items()}
    _table(results, "import litellm (baseline)")
    litellm_wall, _, litellm_cpu = results["import litellm (baseline)"]
    worst = max(results["route --help"][0], results["route --explain"][0]) / litellm_wall
    worst_cpu = max(results["route --help"][2], results["route --explain"][2]) / litellm_cpu
    verdict = "meets" if worst < 0.1 else "MISSES"
    print(f"\nworst route/litellm wall ratio: {worst:.3f} ({verdict} the < 0.1 target); runs per command: {args.runs} "
          f"(after a warm-up run that writes the bytecode); in CPU time {worst_cpu:.3f}; load average "
          f"{os.getloadavg()[0]:.1f}\n")
    _table(requests, "litellm.completion one-shot (baseline)")
    frontier, _, frontier_cpu = requests["route -m frontier (anthropic)"]
    one_shot = requests["litellm.completion one-shot (baseline)"][0]
    print(f"\nfrontier (anthropic kind) request from a fresh process: {frontier:.3f} s "
          f"({'meets' if frontier < 0.6 else 'MISSES'} the < 0.6 s target), {frontier / one_shot:.3f} of the "
          f"one-shot ({'meets' if frontier < 0.1 * one_shot else 'MISSES'} the < 0.1 target), {frontier_cpu:.3f} s "
          f"of CPU; load average {os.getloadavg()[0]:.1f}")
    kept, skipped = (requests[case][0] for case in TEARDOWN)
    print(f"the frontier request from `python -c`: {kept:.3f} s with the interpreter's teardown, {skipped:.3f} s "
          f"without it (the `route` program): {1000 * (kept - skipped):.0f} ms saved")
    return 0 if worst < 0.1 and frontier < 0.6 and frontier < 0.1 * one_shot else 1

if __name__ == "__main__":
    sys.exit(main())
