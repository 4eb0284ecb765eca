"""bpf_conformance tests in the VM: the same files the kernel runner takes,
run with uBPF's convention (``r1`` = the test's memory, ``r2`` = its length,
a 512-byte stack) and compared on the full 64-bit ``r0``.

Unlike the kernel, the VM has no verifier: the tests Linux refuses to load
(``callx``, constant shifts out of range) are defined by the ISA and run here.
"""
from __future__ import annotations

from .._record import Record, record
from ..errors import PyebpfError
from ..isa import decode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..isa import Insn
    from ..text import ConformanceTest


@record
class VmOutcome(Record):
    """One test's result: ``status`` is pass, fail, error or skip."""

    name: str
    status: str
    expected: int | None = None
    actual: int | None = None
    detail: str = ""


def test_program(test: ConformanceTest) -> list[Insn]:
    """The instructions of a test: its ``raw`` section, else its ``asm`` assembled."""
    raw = test.raw_bytes()
    if raw is not None:
        return decode(raw)
    return list(test.program().finalize())


def run_test(test: ConformanceTest) -> VmOutcome:
    """Run one parsed test in the VM."""
    from .machine import Vm

    if test.skip_reason:
        return VmOutcome(test.name, "skip", detail=test.skip_reason)
    if test.result is None:
        return VmOutcome(test.name, "skip", detail="no expected result")
    expected = test.result & 0xFFFFFFFFFFFFFFFF
    try:
        actual = Vm(test_program(test)).run(test.mem)
    except PyebpfError as exc:
        return VmOutcome(test.name, "error", expected, detail=str(exc))
    return VmOutcome(test.name, "pass" if actual == expected else "fail", expected, actual)
