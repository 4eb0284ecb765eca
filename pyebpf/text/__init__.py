"""Text assembly for eBPF: two dialects, a printer for each, and a disassembler.

Dialects
    ``llvm``      LLVM's BPF pseudo-C (``r0 = *(u32 *)(r1 + 4)``, ``if w1 > 5 goto +2``),
                  also in the kernel verifier's spelling (``goto pc+2``,
                  ``call bpf_map_lookup_elem#1``); printed in ``style="objdump"``
                  (llvm-objdump) or ``style="verifier"`` (the kernel's disasm.c).
    ``mnemonic``  the bpf_conformance/uBPF syntax (``mov32 %r0, 1``, ``ldxw %r0, [%r1+4]``).

API
    :func:`assemble` text -> :class:`~pyebpf.program.core.Program`;
    :func:`parse_insn` / :func:`format_insn` for one instruction;
    :func:`get_instructions` / :func:`disassemble` for whole programs (bytes,
    instructions or a Program);
    :func:`~pyebpf.text.conformance_file.load_conformance` reads bpf_conformance ``.data`` files.

Everything here is pure Python and never needs LLVM or the kernel.
"""
from .assembler import DIALECTS, assemble, format_insn, parse_insn
from .conformance_file import ConformanceTest, load_conformance, parse_conformance
from .disasm import Instruction, disassemble, get_instructions

__all__ = ["DIALECTS", "assemble", "format_insn", "parse_insn", "Instruction", "disassemble",
           "get_instructions", "ConformanceTest", "load_conformance", "parse_conformance"]
