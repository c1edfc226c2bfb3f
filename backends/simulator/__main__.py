"""`python -m backends.simulator --port 0 [--profiles FILE]`: the simulated server in a process
of its own, for benchmarks that must not share a GIL with the router they measure.

Prints one line, `listening <url>` (the root; OpenAI clients use <url>/v1), once it accepts
connections, then serves until stdin closes or the process is told to stop.
"""

from __future__ import annotations

import argparse
import sys

from backends.simulator.runner import SimServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.simulator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--profiles", help="YAML file of model profiles (default: the built-in ones)")
    args = parser.parse_args(argv)
    with SimServer(args.profiles, host=args.host, port=args.port) as sim:
        print(f"listening {sim.url}", flush=True)
        # The parent holds our stdin: when it closes it (or exits), stop serving.
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
