"""x86-64 ``struct pt_regs``: where each register lives in a probe's context.

A uprobe/kprobe program receives ``r1 = struct pt_regs *``.  This module is the
data (register name → byte offset and width) plus a few DSL helpers that
emit the loads::

    from pyebpf import ptregs
    ptregs.offset("rdi")          # (112, 8)
    ptregs.offset("%edi")         # (112, 4): the low half of rdi
    ptregs.offset("ah")           # (81, 1): bits 8-15 of rax
    ptregs.ARG_REGS[0], ptregs.RET_REG, ptregs.IP, ptregs.SP   # 'rdi' 'rax' 'rip' 'rsp'

    p = Program("args")
    p.mov(R6, R1)                          # keep ctx: helpers clobber r1-r5
    ptregs.load_arg(p, R7, 0, ctx=R6)      # r7 = first argument (rdi)
    ptregs.load_ret(p, R8, ctx=R6)         # r8 = return value (rax), for uretprobes

Layout (the user-visible ``struct pt_regs`` of ``<asm/ptrace.h>``, which is
also what BPF programs see; ``tests/attach/test_ptregs.py`` checks it against
the header with gcc): r15 0, r14 8, r13 16, r12 24, rbp 32, rbx 40, r11 48,
r10 56, r9 64, r8 72, rax 80, rcx 88, rdx 96, rsi 104, rdi 112, orig_rax 120,
rip 128, cs 136, eflags 144, rsp 152, ss 160; 168 bytes.

Sub-registers (``eax``, ``ax``, ``al``, ``ah``, ``r8d``, ``r8w``, ``r8b``,
``dil``...) map to their full register's slot; :func:`offset` gives the
offset of their own bytes (little-endian: the slot's offset, +1 for the
``*h`` high bytes) and their width, so a load of that size at that offset
reads exactly the sub-register.  The USDT argument decoder reuses this table.
"""
from __future__ import annotations

from ._record import Record, record
from .errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ARCH", "PT_REGS_SIZE", "FULL_REGISTERS", "Register", "REGISTERS", "ARG_REGS",
           "RET_REG", "IP", "SP", "FP", "register", "offset", "slot", "arg_offset",
           "ret_offset", "load_reg", "load_arg", "load_ret", "load_ip", "load_sp"]

ARCH = "x86_64"
PT_REGS_SIZE = 168

#: Full 64-bit registers in ``struct pt_regs`` order; the offset is 8 * index.
FULL_REGISTERS: tuple[str, ...] = (
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
    "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss",
)

#: Function-argument registers of the System V x86-64 ABI, in order.
ARG_REGS: tuple[str, ...] = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
#: Register holding a function's (integer) return value.
RET_REG = "rax"
#: Instruction pointer, stack pointer and frame pointer.
IP, SP, FP = "rip", "rsp", "rbp"


@record
class Register(Record):
    """A register name as it may appear in code (``"edi"``).

    ``full`` is the 64-bit register it belongs to (``"rdi"``), ``slot`` the
    offset of that register in ``struct pt_regs``, ``offset``/``size`` the
    bytes this name covers (``size`` is 1, 2, 4 or 8).
    """

    name: str
    full: str
    slot: int
    offset: int
    size: int

    @property
    def shift(self) -> int:
        """Bit position of this name's value inside the full register (8 for ``ah``)."""
        return (self.offset - self.slot) * 8


def _build() -> dict[str, Register]:
    regs: dict[str, Register] = {}

    def add(name: str, full: str, size: int, high: bool = False) -> None:
        slot = FULL_REGISTERS.index(full) * 8
        regs[name] = Register(name, full, slot, slot + (1 if high else 0), size)

    for full in FULL_REGISTERS:
        add(full, full, 8)
    # legacy registers: rax eax ax al ah ...
    for letter in "abcd":
        full = f"r{letter}x"
        add(f"e{letter}x", full, 4)
        add(f"{letter}x", full, 2)
        add(f"{letter}l", full, 1)
        add(f"{letter}h", full, 1, high=True)
    for base in ("si", "di", "bp", "sp"):
        full = f"r{base}"
        add(f"e{base}", full, 4)
        add(base, full, 2)
        add(f"{base}l", full, 1)
    for n in range(8, 16):
        full = f"r{n}"
        add(f"r{n}d", full, 4)
        add(f"r{n}w", full, 2)
        add(f"r{n}b", full, 1)
        add(f"r{n}l", full, 1)          # AMD's name for the low byte
    add("eip", "rip", 4)
    add("ip", "rip", 2)
    add("rflags", "eflags", 8)
    add("flags", "eflags", 2)
    return regs


#: Every accepted register name → :class:`Register`.
REGISTERS: dict[str, Register] = _build()


def register(name: str) -> Register:
    """The :class:`Register` for ``name`` (case-insensitive, ``%`` prefix allowed)."""
    key = name.strip().lower().lstrip("%")
    reg = REGISTERS.get(key)
    if reg is None:
        import difflib
        close = difflib.get_close_matches(key, list(REGISTERS), n=4, cutoff=0.5)
        raise OptionError(f"{name!r} is not an x86-64 general-purpose register in "
                          f"struct pt_regs" + (f"; did you mean {', '.join(close)}?" if close
                                              else f"; known: {', '.join(FULL_REGISTERS)}"))
    return reg


def offset(name: str) -> tuple[int, int]:
    """``(byte offset, size)`` of register ``name`` in ``struct pt_regs``."""
    reg = register(name)
    return reg.offset, reg.size


def slot(name: str) -> int:
    """Offset of the full 64-bit register that ``name`` belongs to."""
    return register(name).slot


def arg_offset(n: int) -> int:
    """Offset of the ``n``-th (0-based) integer argument register."""
    if not 0 <= n < len(ARG_REGS):
        raise OptionError(f"argument {n} is not passed in a register on x86-64 (only "
                          f"0..{len(ARG_REGS) - 1}: {', '.join(ARG_REGS)}); later ones are on "
                          "the stack at rsp+8*(n-5) at function entry")
    return register(ARG_REGS[n]).slot


def ret_offset() -> int:
    """Offset of the return-value register (rax)."""
    return register(RET_REG).slot


# ------------------------------------------------------------------ DSL helpers
def _ctx_reg(ctx: Any) -> Any:
    if ctx is None:
        from .program import R1
        return R1
    return ctx


def load_reg(program: Any, dst: Any, name: str, *, ctx: Any = None, signed: bool = False) -> Any:
    """Emit ``dst = <register name>`` read from ``*ctx`` (pt_regs, default ``r1``).

    Sub-registers load only their bytes (``ldxw`` for ``edi``, ``ldxb`` at
    +1 for ``ah``), zero-extended, or sign-extended when ``signed``
    (cpu v4 ``ldxs*``).  Returns the program.
    """
    reg = register(name)
    signed = signed and reg.size < 8
    return program.load(dst, _ctx_reg(ctx), reg.offset, reg.size, signed=signed)


def load_arg(program: Any, dst: Any, n: int, *, ctx: Any = None, size: int = 8,
             signed: bool = False) -> Any:
    """Emit ``dst = argument n`` (0-based; ``rdi rsi rdx rcx r8 r9``) of the probed
    function, read from ``*ctx`` (default ``r1``).

    ``size`` 1/2/4 reads that many low bytes (an ``int`` argument is ``size=4``;
    ``signed=True`` sign-extends it).  Valid at function entry (uprobe at
    offset 0).
    """
    if size not in (1, 2, 4, 8):
        raise OptionError(f"argument size must be 1, 2, 4 or 8, not {size}")
    return program.load(dst, _ctx_reg(ctx), arg_offset(n), size,
                        signed=signed and size < 8)


def load_ret(program: Any, dst: Any, *, ctx: Any = None, size: int = 8,
             signed: bool = False) -> Any:
    """Emit ``dst = return value`` (rax) from ``*ctx`` (default ``r1``): for uretprobes."""
    if size not in (1, 2, 4, 8):
        raise OptionError(f"return value size must be 1, 2, 4 or 8, not {size}")
    return program.load(dst, _ctx_reg(ctx), ret_offset(), size, signed=signed and size < 8)


def load_ip(program: Any, dst: Any, *, ctx: Any = None) -> Any:
    """Emit ``dst = rip`` (the probed address, at a uprobe)."""
    return load_reg(program, dst, IP, ctx=ctx)


def load_sp(program: Any, dst: Any, *, ctx: Any = None) -> Any:
    """Emit ``dst = rsp``."""
    return load_reg(program, dst, SP, ctx=ctx)
