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
    :func:`~pyebpf.text.conformance_file.load_conformance` reads bpf_conformance ``.data`` files;
    a clang-built object file is listed by
    :func:`pyebpf.objects.listing.disassemble_object` (functions, relocation,
    CO-RE and source annotations: it reads ELF and BTF, layers above this one).

Extensions both dialects share (see :mod:`pyebpf.text.common`)
    * map references: ``r1 = counts ll`` / ``lddw %r1, counts`` is an ld_imm64
      with ``src=PSEUDO_MAP_FD`` and ``Insn.map_ref="counts"`` (bound to a
      real map fd by the loader); every pseudo source has a ``NAME(ARG)``
      spelling: ``map_fd(3)``, ``map_value(counts) + 8``, ``btf_id(N)``,
      ``func(label)``, ``map_idx(N)``, ``map_idx_value(N) + 8``;
    * raw slots: ``.8byte 0x...`` (one little-endian u64 per slot, the value a
      bpf_conformance ``-- raw`` section holds); the disassembler prints
      invalid slots this way, so its output always assembles back.

Everything here is pure Python and never needs LLVM or the kernel.
"""
from .assembler import DIALECTS, assemble, format_insn, parse_insn
from .conformance_file import ConformanceTest, load_conformance, parse_conformance
from .disasm import Instruction, disassemble, get_instructions

__all__ = ["DIALECTS", "assemble", "format_insn", "parse_insn", "Instruction", "disassemble",
           "get_instructions", "ConformanceTest", "load_conformance", "parse_conformance"]
