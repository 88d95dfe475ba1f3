"""`python -m benchmarks [NAME ...]`: run benchmarks and update `benchmarks/RESULTS.md`.

With no names every benchmark runs. Results are kept per benchmark in
`benchmarks/results.json`, so running one benchmark replaces its own section of
RESULTS.md and keeps the others (each section says when it was measured).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

# The suite's setting, and LangGraph's future default: checkpoints only deserialize
# types the graph declares. Set before LangGraph is imported.
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

from benchmarks import _harness, _local
from benchmarks._harness import BenchResult

ORDER = (
    "overhead",
    "concurrency",
    "prompt_growth",
    "checkpoint_growth",
    "record",
    "quality",
    "refine_outcomes",
    "strategies",
    "real_overhead",
    "judge_contradictions",
    "selection",
    "cascade",
    "calibration",
    "edits",
    "ladder",
    "agent_ladder",
    "faults",
    "pairwise_local",
    "demo",
)
NEEDS_LOCAL_MODEL = (
    "quality",
    "refine_outcomes",
    "strategies",
    "real_overhead",
    "judge_contradictions",
    "edits",
    "pairwise_local",
    "demo",
)


def _runner(name: str) -> Callable[[bool], BenchResult]:
    import importlib

    module = importlib.import_module(f"benchmarks.{name}")
    run: Callable[[bool], BenchResult] = module.run
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of: {', '.join(ORDER)}")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repetitions and tasks, for a smoke test; RESULTS.md is not written",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in ORDER]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(ORDER)}")
    names = [n for n in ORDER if n in args.names] if args.names else list(ORDER)
    results = _harness.load_results()
    failed = []
    try:
        for name in names:
            print(f"== {name}", flush=True)
            start = time.perf_counter()
            try:
                result = _runner(name)(args.quick)
            except Exception as exc:  # report and go on with the others
                print(f"   failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                failed.append(name)
                continue
            result.seconds = time.perf_counter() - start
            result.date = _harness.now()
            result.machine = _harness.machine()
            for figure in result.figures:
                status = {None: "", True: "  pass", False: "  MISS"}[figure.passed]
                print(
                    f"   {figure.name}: {figure.value:.3f}{figure.unit} "
                    f"[{figure.spread}] {figure.target}{status}",
                    flush=True,
                )
            results[name] = result
            if not args.quick:
                _harness.save_results(results)
                _harness.RESULTS_MD.write_text(_harness.render(results, ORDER))
    finally:
        _local.stop()
    if not args.quick:
        print(f"wrote {_harness.RESULTS_MD}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
