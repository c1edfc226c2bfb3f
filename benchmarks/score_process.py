"""`route score` over a whole routing set as one process, beside Wayfinder Router doing the same.

    python benchmarks/score_process.py [FILE] [--runs 5]

FILE (default: the 14k MMLU prompts of ../shared/data/routing/mmlu.jsonl, else the committed
sample) is scored by `route score FILE > /dev/null`, and by a Python process that reads the
same JSONL and writes the same {"id", "score"} lines with Wayfinder Router's
`score_complexity` (the `wayfinder-router` package, in the bench extra; skipped, saying why,
without it). Each command runs once to warm the file cache and write its bytecode (as an
installed package has it), then `--runs` times; prints median wall and CPU seconds (user +
system: what a busy machine does not inflate), and the ratios. Target (issue 26): route at
half of Wayfinder's whole process or less.
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

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "routing" / "mmlu.jsonl"
SAMPLE = ROOT / "tests" / "data" / "routing_sample.jsonl"
WAYFINDER = """
import json, sys
from wayfinder_router import score_complexity
with open(sys.argv[1], encoding="utf-8") as f:
    out = sys.stdout
    for line in f:
        r = json.loads(line)
        out.write(json.dumps({"id": r["id"], "score": round(score_complexity(r["prompt"]).score, 6)}) + "\\n")
"""


def _measure(command: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    walls, cpus = [], []
    for index in range(runs + 1):
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{command} failed: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
        if index:
            walls.append(wall)
            cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=SHARED if SHARED.exists() else SAMPLE)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    prompts = sum(1 for line in args.file.open(encoding="utf-8") if line.strip())
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(ROUTE_HOME=home, PYTHONPYCACHEPREFIX=str(Path(home) / "pycache"), PYTHONPATH=str(ROOT))
        commands = {"route score": [sys.executable, "-m", "router.cli", "score", str(args.file)],
                    "python -c pass (floor)": [sys.executable, "-c", "pass"]}
        probe = subprocess.run([sys.executable, "-c", "import wayfinder_router"], capture_output=True, env=env)
        if probe.returncode == 0:
            commands["wayfinder score_complexity"] = [sys.executable, "-c", WAYFINDER, str(args.file)]
        else:
            print("Wayfinder Router not measured: `import wayfinder_router` fails; pip install -e '.[bench]'")
        results = {name: _measure(cmd, args.runs, env) for name, cmd in commands.items()}
    print(f"{prompts} prompts of {args.file}, whole process, median of {args.runs} runs; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'command':<30} {'wall s':>8} {'CPU s':>8}")
    for name, (wall, cpu) in results.items():
        print(f"{name:<30} {wall:>8.3f} {cpu:>8.3f}")
    if "wayfinder score_complexity" in results:
        (wall, cpu), (their_wall, their_cpu) = results["route score"], results["wayfinder score_complexity"]
        print(f"route / wayfinder: wall x{wall / their_wall:.2f}, CPU x{cpu / their_cpu:.2f} "
              f"(target x0.50: {'met' if cpu <= 0.5 * their_cpu else 'NOT met'} in CPU, "
              f"{'met' if wall <= 0.5 * their_wall else 'NOT met'} in wall)")


if __name__ == "__main__":
    main()
