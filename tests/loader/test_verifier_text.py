"""Our disassembly in the verifier's spelling equals what the kernel's
verifier log (log_level 2) prints, instruction by instruction.

Normalisation: ``ld_imm64`` of a map (fd or value) is skipped -- the kernel
prints the map's kernel address, which we cannot know before loading.
"""
import re

import pytest

from pyebpf.conformance import wrap
from pyebpf.isa import decode, opcodes as op
from pyebpf.loader import load
from pyebpf.maps import ArrayMap
from pyebpf.text import format_insn, load_conformance

from .everything import socket_filter_everything, xdp_everything

pytestmark = pytest.mark.kernel
LOG_INSN = re.compile(r"^(\d+): \(([0-9a-f]{2})\) (.*?)(?:\s+; .*)?$")


def compare_log(log: str, code: bytes) -> tuple[int, list[str]]:
    by_slot = {}
    slot = 0
    for insn in decode(code):
        by_slot[slot] = insn
        slot += insn.slots
    seen, bad = 0, []
    for line in log.splitlines():
        m = LOG_INSN.match(line)
        if not m:
            continue
        insn = by_slot[int(m.group(1))]
        assert int(m.group(2), 16) == insn.code
        if insn.code == op.OP_LD_IMM64 and insn.src in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_VALUE):
            continue
        seen += 1
        ours = format_insn(insn, dialect="llvm", style="verifier")
        if ours != m.group(3):
            bad.append(f"{m.group(1)}: kernel {m.group(3)!r} ours {ours!r}")
    return seen, bad


def test_conformance_programs_print_like_the_verifier(conformance_dir):
    total = 0
    mismatches = []
    with ArrayMap("u64", 1, name="result") as result:
        for path in sorted(conformance_dir.glob("*.data")):
            test = load_conformance(path)
            if test.result is None or test.asm is None:
                continue
            program = wrap(test.program(), len(test.mem))
            try:
                loaded = load(program, "xdp", maps={"result": result}, check=False, log_level=2)
            except OSError:
                continue  # the 13 kernel rejections
            with loaded:
                seen, bad = compare_log(loaded.log, program.encode())
            total += seen
            mismatches += [f"{path.name} {b}" for b in bad]
    assert total > 4000
    assert not mismatches, "\n".join(mismatches[:20])


@pytest.mark.parametrize("build, prog_type", [(xdp_everything, "xdp"),
                                              (socket_filter_everything, "socket_filter")])
def test_every_opcode_prints_like_the_verifier(build, prog_type):
    program = build()
    with ArrayMap("u64", 1, name="scratch") as scratch:
        with load(program, prog_type, maps={"scratch": scratch}, log_level=2) as loaded:
            seen, bad = compare_log(loaded.log, program.encode())
    # every instruction of the program was printed at least once
    printed = {int(m.group(1)) for m in map(LOG_INSN.match, loaded.log.splitlines()) if m}
    slots = {s for s, _ in _slots(program.encode())}
    assert slots <= printed
    assert seen >= len(slots) - 4
    assert not bad, "\n".join(bad)


def _slots(code):
    slot = 0
    for insn in decode(code):
        yield slot, insn
        slot += insn.slots
