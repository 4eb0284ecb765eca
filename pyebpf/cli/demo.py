"""``pyebpf demo``: the README's main job.

Builds a small program with the DSL, shows it in both text dialects, loads it
into the kernel, runs it with BPF_PROG_TEST_RUN, reads its map, and shows what
the kernel made of it (the translated program and the JIT's x86-64 code).
"""
from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("demo", help="a guided tour: assemble, load, run, introspect",
                       description=__doc__)
    p.add_argument("--runs", type=int, default=1000, help="how many times to run the program (default 1000)")
    p.set_defaults(func=run)


def _section(title: str) -> None:
    print(f"\n== {title}")


def run(args: argparse.Namespace) -> int:
    from ..loader import load
    from ..maps import HashMap
    from ..program import R0, R1, R6, Program
    from ..text import disassemble

    counts = HashMap(key="u32", value="u64", max_entries=16, name="counts")
    p = Program("demo")
    p.mov(R6, R1)                              # keep the context
    p.ldxw(R1, R6, 4).ldxw(R0, R6, 0)          # data_end, data
    p.sub(R1, R0)                              # packet length
    key = p.stack_store(R1, size=4)            # count packets by length
    p.map_increment(counts, key)
    p.ret(2)                                   # XDP_PASS

    _section("the program, built with the DSL (llvm dialect)")
    print(disassemble(p, dialect="llvm"))
    _section("the same program in the bpf_conformance mnemonic dialect")
    print(disassemble(p, dialect="mnemonic"))

    with counts, load(p, "xdp", log_level=1) as prog:
        _section("loaded: the verifier's summary")
        print(prog.log.strip().splitlines()[-1])
        info = prog.info()
        print(f"id {info.id}, tag {info.tag}, {info.xlated_len // 8} xlated insns, "
              f"{info.jited_len} bytes of x86-64")
        for size in (64, 128):
            result = prog.test_run(bytes(size), repeat=args.runs)
            print(f"ran {args.runs} times on a {size}-byte packet: returned {result.retval}, "
                  f"{result.duration_ns} ns per run")
        _section("the map, read back")
        for k, v in sorted(counts.items()):
            print(f"  packets of {k} bytes: {v}")
        _section("what the kernel made of it (xlated)")
        print(prog.xlated_text())
        _section("the JIT's x86-64 code (first lines)")
        print("\n".join(prog.jited_asm().splitlines()[:12]))
    return 0
