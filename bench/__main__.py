"""``python -m bench PART`` (``make bench``): benchmarks beside their baselines, from a checkout.

A development tool, not part of the installed package: the benchmarks import the checkout's
topologies and test helpers.
"""

from __future__ import annotations

import argparse
import sys

from bench.runner import PARTS, run_benchmarks


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=[*PARTS, "all"], help="which benchmark")
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    parser.add_argument("--quick", action="store_true", help="fewer items (smoke run, figures are noisier)")
    parser.add_argument("--output", default="bench/results.json", help="where to write the records")
    parser.add_argument(
        "--pure-vs-compiled",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="run each part ROUNDS times compiled and pure Python, alternating, and compare them",
    )
    args = parser.parse_args()
    return run_benchmarks(
        args.part,
        as_json=args.json,
        quick=args.quick,
        output=args.output,
        pure_vs_compiled=args.pure_vs_compiled,
    )


if __name__ == "__main__":
    sys.exit(main())
