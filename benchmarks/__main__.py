"""Run the benchmarks: ``python -m benchmarks [--quick] [NAME ...]``.

Without NAME: every ``bench_*.py`` module, then ``compare`` (pyebpf against
bpftrace and BCC, see ``benchmarks/compare.py``), whose tables are written to
``benchmarks/results/latest.md`` (``--quick``: to a temporary directory, so a
quick run leaves the tree alone).  The output ends with one line per target::

    target cold-start-wall: 0.21 (goal <= 0.25) met
"""
from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys
import tempfile
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds and events (under a minute)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per benchmark")
    parser.add_argument("--rounds", type=int,
                        help="rounds of each comparison case (default: 7/3/5, quick 2/1/1)")
    parser.add_argument("--peers", default="pyebpf,bpftrace,bcc",
                        help="tools to compare (default: %(default)s)")
    parser.add_argument("--results", type=pathlib.Path,
                        help="where the comparison's markdown and JSON go "
                             "(default: benchmarks/results/, --quick: a temporary directory)")
    parser.add_argument("--readme", action="store_true",
                        help="also put the comparison's tables in README.md's Benchmarks section")
    parser.add_argument("names", nargs="*",
                        help=f"benchmarks to run (default: all of {', '.join(available())}, "
                             "compare)")
    args = parser.parse_args(argv)
    names = args.names or available() + ["compare"]
    for name in names:
        if name not in available() and name != "compare":
            parser.error(f"unknown benchmark {name!r}; available: "
                         f"{', '.join(available())}, compare")
    sys.path.insert(0, str(HERE.parent))
    t0 = time.perf_counter()
    results: dict[str, dict] = {}
    failed = []
    for name in [n for n in names if n != "compare"]:
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
            result = module.run(quick=args.quick)
        except Exception:    # noqa: BLE001 - one broken module must not hide the others
            failed.append(name)
            print(f"== {name}: failed\n{traceback.format_exc()}", file=sys.stderr)
            continue
        results[name] = result
        if args.json:
            print(json.dumps({"benchmark": name, **result}, default=str))
        else:
            print(f"== {name}")
            for key, value in result.items():
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    if "compare" in names:
        from benchmarks import compare
        tools = tuple(t.strip() for t in args.peers.split(",") if t.strip())
        unknown = set(tools) - set(compare.TOOLS)
        if unknown:
            parser.error(f"unknown peer(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(compare.TOOLS)}")
        print("== compare (pyebpf, bpftrace, BCC alternately)", flush=True)
        res = compare.run(quick=args.quick, rounds=args.rounds, tools=tools,
                          module_results=results,
                          log=lambda msg: print(msg, flush=True))
        default_dir = pathlib.Path(tempfile.gettempdir()) / "pyebpf-bench" if args.quick \
            else compare.RESULTS
        path = compare.write(res, args.results or default_dir)
        if args.json:
            print(json.dumps({"benchmark": "compare", **res}, default=str))
        else:
            print(compare.markdown(res))
        print(f"results written to {path}")
        if args.readme:
            print("README.md updated" if compare.update_readme(res)
                  else "README.md has no benchmark markers: not updated")
        print(f"benchmarks took {time.perf_counter() - t0:.0f} s")
        for line in compare.target_lines(res):
            print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
