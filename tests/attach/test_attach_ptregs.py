"""pyebpf.ptregs: the pt_regs table against <asm/ptrace.h>, and the DSL helpers."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pyebpf import ptregs
from pyebpf.isa import opcodes as op
from pyebpf.program import R6, R7, Program

EXPECTED = {"r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40, "r11": 48,
            "r10": 56, "r9": 64, "r8": 72, "rax": 80, "rcx": 88, "rdx": 96, "rsi": 104,
            "rdi": 112, "orig_rax": 120, "rip": 128, "cs": 136, "eflags": 144, "rsp": 152,
            "ss": 160}


def test_full_registers():
    for name, off in EXPECTED.items():
        assert ptregs.offset(name) == (off, 8)
    assert ptregs.PT_REGS_SIZE == 168
    assert [ptregs.slot(r) for r in ptregs.ARG_REGS] == [112, 104, 96, 88, 72, 64]
    assert ptregs.RET_REG == "rax" and ptregs.IP == "rip" and ptregs.SP == "rsp"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_offsets_match_uapi_header(tmp_path):
    """offsetof(struct pt_regs, X) from the UAPI header, compiled with gcc."""
    src = tmp_path / "off.c"
    body = "".join(f'    printf("{n} %zu\\n", offsetof(struct pt_regs, {n}));\n' for n in EXPECTED)
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <asm/ptrace.h>\n"
                   "int main(void) {\n" + body +
                   '    printf("size %zu\\n", sizeof(struct pt_regs));\n    return 0;\n}\n')
    exe = tmp_path / "off"
    r = subprocess.run(["gcc", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, f"<asm/ptrace.h> not usable (linux-libc-dev):\n{r.stderr[-300:]}"
    out = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True,
                                                       text=True, check=True).stdout.splitlines())
    assert int(out.pop("size")) == ptregs.PT_REGS_SIZE
    assert {k: int(v) for k, v in out.items()} == EXPECTED


@pytest.mark.parametrize("name,full,offset,size", [
    ("eax", "rax", 80, 4), ("ax", "rax", 80, 2), ("al", "rax", 80, 1), ("ah", "rax", 81, 1),
    ("ebx", "rbx", 40, 4), ("bh", "rbx", 41, 1), ("ecx", "rcx", 88, 4), ("dl", "rdx", 96, 1),
    ("edi", "rdi", 112, 4), ("di", "rdi", 112, 2), ("dil", "rdi", 112, 1),
    ("esi", "rsi", 104, 4), ("sil", "rsi", 104, 1), ("ebp", "rbp", 32, 4), ("bpl", "rbp", 32, 1),
    ("esp", "rsp", 152, 4), ("spl", "rsp", 152, 1),
    ("r8d", "r8", 72, 4), ("r8w", "r8", 72, 2), ("r8b", "r8", 72, 1), ("r15d", "r15", 0, 4),
    ("r12b", "r12", 24, 1), ("eip", "rip", 128, 4), ("%RDI", "rdi", 112, 8),
])
def test_sub_registers(name, full, offset, size):
    reg = ptregs.register(name)
    assert (reg.full, reg.offset, reg.size) == (full, offset, size)
    assert ptregs.offset(name) == (offset, size)
    assert reg.slot == EXPECTED[full]
    assert reg.shift == (8 if name.endswith("h") and len(name) == 2 else 0)


def test_every_name_is_inside_its_slot():
    for reg in ptregs.REGISTERS.values():
        assert reg.slot <= reg.offset and reg.offset + reg.size <= reg.slot + 8
        assert reg.size in (1, 2, 4, 8)


def test_unknown_register():
    with pytest.raises(ValueError, match="did you mean"):
        ptregs.offset("rdx2")
    with pytest.raises(ValueError, match="stack"):
        ptregs.arg_offset(6)


def test_load_helpers_emit_ldx():
    p = Program("t")
    ptregs.load_arg(p, R7, 0)
    ptregs.load_arg(p, R7, 1, ctx=R6, size=4, signed=True)
    ptregs.load_ret(p, R7)
    ptregs.load_reg(p, R7, "ah", ctx=R6)
    ptregs.load_ip(p, R7)
    insns = p.insns
    assert (insns[0].code, insns[0].dst, insns[0].src, insns[0].off) == \
        (op.LDX | op.MEM | op.DW, 7, 1, 112)
    assert (insns[1].code, insns[1].src, insns[1].off) == (op.LDX | op.MEMSX | op.W, 6, 104)
    assert (insns[2].code, insns[2].off) == (op.LDX | op.MEM | op.DW, 80)
    assert (insns[3].code, insns[3].off) == (op.LDX | op.MEM | op.B, 81)
    assert insns[4].off == 128
