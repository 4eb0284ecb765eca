"""Run the benchmarks: ``python -m benchmarks [--quick] [NAME ...]``."""
from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and events (under a minute)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per benchmark")
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(available())})")
    args = parser.parse_args(argv)
    names = args.names or available()
    for name in names:
        if name not in available():
            parser.error(f"unknown benchmark {name!r}; available: {', '.join(available())}")
    sys.path.insert(0, str(HERE.parent))
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        result = module.run(quick=args.quick)
        if args.json:
            print(json.dumps({"benchmark": name, **result}))
        else:
            print(f"== {name}")
            for key, value in result.items():
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
