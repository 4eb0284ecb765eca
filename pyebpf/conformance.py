"""Run bpf_conformance tests in the kernel.

Each ``.data`` test is assembled (mnemonic dialect), wrapped and loaded as an
XDP program, run once with ``BPF_PROG_TEST_RUN`` and its full 64-bit ``r0``
compared with the expected result -- the same method as the suite's libbpf
plugin:

* the test program becomes a bpf-to-bpf subprogram; the main program calls
  it and stores its ``r0`` into an array map (XDP's own return value is only
  32 bits), which is read back afterwards;
* when the test has input memory, a short prolog bounds-checks the packet and
  sets ``r1`` to the memory and ``r2`` to its length, as uBPF does.

A kernel rejection is a *rejection* (reported with the verifier's reason),
not a failure: the suite has tests for instructions Linux refuses (``callx``,
constant shifts out of range).
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from .errors import AssemblyError, KernelError, ProgramError, VerifierError
from .isa import decode
from .program import R0, R1, R2, R3, R6, Program
from .text import ConformanceTest, load_conformance

if TYPE_CHECKING:
    from .maps import ArrayMap

ETH_HLEN = 14  # XDP test runs need at least an Ethernet header of data


@dataclass
class Outcome:
    """The result of one test: ``status`` is pass, fail, rejected, error or skip."""

    name: str
    status: str
    expected: int | None = None
    actual: int | None = None
    detail: str = ""

    def line(self) -> str:
        """One line of the report: ``PASS     name``, or the status, name and why."""
        if self.status == "pass":
            return f"PASS     {self.name}"
        if self.status == "fail":
            return (f"FAIL     {self.name}: expected 0x{self.expected:x}, got 0x{self.actual:x}")
        if self.status == "rejected":
            return f"REJECTED {self.name}: {self.detail}"
        if self.status == "skip":
            return f"SKIP     {self.name}: {self.detail}"
        return f"ERROR    {self.name}: {self.detail}"


def wrap(test_program: Program, mem_len: int) -> Program:
    """The XDP program that runs ``test_program`` as a subprogram and stores
    its ``r0`` in map ``result`` (index 0)."""
    p = Program("conformance", license="GPL")
    if mem_len:
        p.mov(R0, -1)
        p.mov(R6, R1)
        p.ldxw(R1, R6, 0)            # xdp_md->data
        p.ldxw(R2, R6, 4)            # xdp_md->data_end
        p.mov(R3, R1)
        p.add(R3, mem_len)
        p.jle(R3, R2, "in_bounds")
        p.exit()
        p.label("in_bounds")
        p.mov(R2, mem_len)
    p.call_local("test")
    p.ld_map_value(R1, "result", 0)
    p.stxdw(R1, 0, R0)
    p.exit()
    body = p.subprogram("test")
    # the test's offsets are already resolved relative to its own slots, which
    # stay contiguous inside the subprogram
    for insn in test_program.finalize():
        new = insn.copy()
        new.target = None
        body.insns.append(new)
    return p


def run_test(test: ConformanceTest, result_map: ArrayMap | None = None) -> Outcome:
    """Run one parsed test in the kernel."""
    from .loader import load
    from .maps import ArrayMap

    name = test.name
    if test.skip_reason:
        return Outcome(name, "skip", detail=test.skip_reason)
    if test.result is None:
        return Outcome(name, "skip", detail="no expected result")
    try:
        if test.raw is not None:
            prog = Program(name)
            for insn in decode(test.raw_bytes() or b""):
                prog.insns.append(insn)
        else:
            prog = test.program()
    except (AssemblyError, ProgramError, ValueError) as exc:
        return Outcome(name, "error", detail=f"does not assemble: {exc}")
    own_map = result_map is None
    result = result_map if result_map is not None else ArrayMap("u64", 1, name="result")
    try:
        wrapped = wrap(prog, len(test.mem))
        data = test.mem + bytes(max(0, ETH_HLEN - len(test.mem)))
        result[0] = 0
        try:
            with load(wrapped, "xdp", maps={"result": result}, check=False) as loaded:
                loaded.test_run(data)
        except VerifierError as exc:
            return Outcome(name, "rejected", test.result, detail=exc.message)
        except KernelError as exc:
            return Outcome(name, "rejected", test.result, detail=str(exc).splitlines()[0])
        except ProgramError as exc:
            return Outcome(name, "error", detail=str(exc))
        actual = result[0]
        expected = test.result & 0xFFFFFFFFFFFFFFFF
        status = "pass" if actual == expected else "fail"
        return Outcome(name, status, expected, actual)
    finally:
        if own_map:
            result.close()


def data_files(directory: str | os.PathLike[str]) -> list[pathlib.Path]:
    """The ``*.data`` files of a bpf_conformance directory, sorted (a ``tests/``
    subdirectory is used when the directory is the suite's root)."""
    root = pathlib.Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    files = sorted(root.glob("*.data"))
    if not files and (root / "tests").is_dir():
        files = sorted((root / "tests").glob("*.data"))
    if not files:
        raise FileNotFoundError(f"no *.data files in {root}")
    return files


def run_directory(directory: str | os.PathLike[str]) -> Iterator[Outcome]:
    """Run every test of a directory, yielding outcomes as they come."""
    from .maps import ArrayMap

    with ArrayMap("u64", 1, name="result") as result:
        yield from run_each(directory, lambda test: run_test(test, result))


def run_each(directory: str | os.PathLike[str],
             run: Callable[[ConformanceTest], Outcome]) -> Iterator[Outcome]:
    """``run(test)`` for every test of a directory, in order, yielding its outcome;
    a file that cannot be parsed is an ``error`` outcome (the others still run)."""
    for path in data_files(directory):
        try:
            test = load_conformance(path)
        except (OSError, ValueError) as exc:
            yield Outcome(path.stem, "error", detail=f"cannot parse: {exc}")
            continue
        yield run(test)


def summary(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many outcomes have each status (``pass``, ``fail``, ``rejected``, ``error``, ``skip``)."""
    counts = {"pass": 0, "fail": 0, "rejected": 0, "error": 0, "skip": 0}
    for o in outcomes:
        counts[o.status] += 1
    return counts
