"""Translate a decoded program into Python source, compiled once.

Each basic block (a run of instructions entered only at its top) becomes one
Python function that returns the slot of the next block; the VM's loop is
then ``pc = blocks[pc]()``.  Inside a block registers live in Python locals
(``r0``..``r10``), loaded from the register list ``R`` at the top and written
back before the block leaves, so an ALU instruction is one Python statement
with no decoding, dispatch or dict lookup at run time.  The operations come
from :mod:`pyebpf.vm.semantics`.

In *step* mode every instruction is a block of its own, so a tracer or a
debugger sees the state between any two instructions.
"""
from __future__ import annotations

from ..isa import Insn, opcodes as op
from ..isa.insn import Form, classify
from . import semantics as sem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

M64 = "0xffffffffffffffff"
M32 = "0xffffffff"
S64 = "0x8000000000000000"
S32 = "0x80000000"
_MASK_FREE = {"div", "mod", "or", "and", "xor", "rsh", "mov"}   # results never exceed the width


class Unit:
    """A translated program: ``source`` and, once bound, ``blocks`` (slot ->
    function or None) and ``lengths`` (slot -> instructions in its block)."""

    def __init__(self, source: str, lengths: list[int], leaders: list[int]) -> None:
        self.source = source
        self.lengths = lengths
        self.leaders = leaders
        self.blocks: list[Callable[[], int] | None] = []

    def bind(self, names: dict[str, object], filename: str) -> None:
        """Compile the source with the run-time ``names`` it calls."""
        scope: dict[str, Any] = dict(names)
        exec(compile(self.source, filename, "exec"), scope)  # noqa: S102 - our own translation
        self.blocks = scope["_make"]()


def translate(insns: list[tuple[int, Insn]], nslots: int, constant: Callable[[int, Insn], int],
              step: bool = False) -> Unit:
    """Translate ``insns`` ((slot, instruction) pairs) into a :class:`Unit`.

    ``constant(slot, insn)`` gives the 64-bit value of an ``ld_imm64`` with a
    pseudo source (a map, a map value, a function address).  An instruction
    that is not valid (:func:`~pyebpf.isa.insn.classify` refuses it) becomes
    a run-time error at its slot, so a program runs up to it.
    """
    starts = {slot for slot, _ in insns}
    forms: dict[int, Form | str] = {}
    leaders = {0}
    for slot, insn in insns:
        try:
            form = forms[slot] = classify(insn)
        except ValueError as exc:
            forms[slot] = getattr(exc, "reason", str(exc))
            leaders.add(slot + 1)
            continue
        nxt = slot + insn.slots
        kind = form.kind
        if kind in ("ja", "gotol", "jcc", "may_goto"):
            off = insn.imm if kind == "gotol" else insn.off
            leaders.update((slot + 1 + off, nxt))
        elif kind in ("call", "callx", "exit", "gotox", "ldabs", "ldind"):
            if kind == "call" and insn.src == op.CALL_LOCAL:
                leaders.add(slot + 1 + insn.imm)
            leaders.add(nxt)
        elif kind == "lddw" and insn.src == op.PSEUDO_FUNC:
            leaders.add(slot + 1 + insn.imm)
    if step:
        leaders |= starts
    leaders = {s for s in leaders if s in starts}
    lengths = [0] * (nslots + 1)
    out = ["def _make():"]
    names = []
    block: list[tuple[int, Insn]] = []
    for slot, insn in sorted(insns, key=lambda p: p[0]):
        if slot in leaders and block:
            out.extend(_block(block, forms, starts, leaders, constant, nslots))
            names.append(block[0][0])
            lengths[block[0][0]] = len(block)
            block = []
        block.append((slot, insn))
    if block:
        out.extend(_block(block, forms, starts, leaders, constant, nslots))
        names.append(block[0][0])
        lengths[block[0][0]] = len(block)
    table = ["None"] * (nslots + 1)
    for s in names:
        table[s] = f"_b{s}"
    out.append(f"    return [{', '.join(table)}]")
    return Unit("\n".join(out) + "\n", lengths, sorted(names))


class _Regs:
    """The registers a block reads and writes, as locals."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self.dirty: set[int] = set()

    def get(self, n: int) -> str:
        self.used.add(n)
        return f"r{n}"

    def put(self, n: int) -> str:
        self.used.add(n)
        self.dirty.add(n)
        return f"r{n}"

    def writeback(self) -> str:
        if not self.dirty:
            return ""
        regs = sorted(self.dirty)
        return "; ".join(f"R[{n}] = r{n}" for n in regs)


def _block(block: list[tuple[int, Insn]], forms: dict[int, Form | str], starts: set[int],
           leaders: set[int], constant: Callable[[int, Insn], int], nslots: int) -> list[str]:
    regs = _Regs()
    body: list[str] = []
    ending: list[str] | None = None
    last_slot, last = block[-1]
    for slot, insn in block:
        form = forms[slot]
        if isinstance(form, str):
            ending = [f"return BAD({slot}, {form!r})"]
            break
        lines = _insn(slot, insn, form, regs, constant)
        if lines is None:      # a block terminator
            ending = _terminator(slot, insn, form, regs, starts)
            break
        body.extend(lines)
    if ending is None:
        nxt = last_slot + last.slots
        ending = [f"return {_target(last_slot, nxt, starts)}"]
    head = [f"    def _b{block[0][0]}():"]
    if regs.used:
        loads = sorted(regs.used)
        head.append("        " + ", ".join(f"r{n}" for n in loads) + " = "
                    + ", ".join(f"R[{n}]" for n in loads))
    wb = regs.writeback()
    tail = ([wb] if wb else []) + ending     # the terminator sees R up to date
    return head + ["        " + x for x in body + tail]


def _target(slot: int, target: int, starts: set[int]) -> str:
    if target in starts:
        return str(target)
    return f"JUMPOUT({slot}, {target})"


def _at_width(reg: str, wide: bool) -> tuple[str, str]:
    """(unsigned, signed): register expression ``reg`` read at 64 or 32 bits."""
    if wide:
        return reg, f"(({reg} ^ {S64}) - {S64})"
    return f"({reg} & {M32})", f"((({reg} & {M32}) ^ {S32}) - {S32})"


def _operands(insn: Insn, form: Form, regs: _Regs) -> tuple[str, str, str, str]:
    """(d, s, sd, ss): unsigned and signed operand expressions at the width."""
    wide = form.alu64
    d, sd = _at_width(regs.get(insn.dst), wide)
    if form.reg:
        s, ss = _at_width(regs.get(insn.src), wide)
    else:
        imm = insn.imm
        s = hex(imm & (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF))
        ss = f"({imm})"
    return d, s, sd, ss


def _addr(base: str, off: int) -> str:
    if off == 0:
        return base
    if off > 0:
        return f"{base} + {off}"
    return f"({base} - {-off}) & {M64}"


def _insn(slot: int, insn: Insn, form: Form, regs: _Regs,
          constant: Callable[[int, Insn], int]) -> list[str] | None:
    """The statements of a straight-line instruction; None for a terminator."""
    kind = form.kind
    if kind == "alu":
        name = form.op
        d, s, sd, ss = _operands(insn, form, regs)
        tmpl = sem.ALU[name][2]
        expr = tmpl.format(d=d, s=s, sd=sd, ss=ss, sh=63 if form.alu64 else 31)
        dst = regs.put(insn.dst)
        if name in _MASK_FREE:
            return [f"{dst} = {expr}"]
        return [f"{dst} = ({expr}) & {M64 if form.alu64 else M32}"]
    if kind == "neg":
        d, _, _, _ = _operands(insn, form, regs)
        return [f"{regs.put(insn.dst)} = (-{d}) & {M64 if form.alu64 else M32}"]
    if kind == "movsx":
        src = regs.get(insn.src)
        expr = sem.UNARY[f"movsx{form.size}"][1].format(s=src)
        return [f"{regs.put(insn.dst)} = ({expr}) & {M64 if form.alu64 else M32}"]
    if kind == "end":
        r = regs.get(insn.dst)
        expr = sem.UNARY[f"{form.op}{form.size}"][1].format(r=r)
        return [f"{regs.put(insn.dst)} = {expr}"]
    if kind == "lddw":
        value = insn.imm64 if insn.src == op.PSEUDO_IMM64 else constant(slot, insn)
        return [f"{regs.put(insn.dst)} = {hex(value)}"]
    if kind in ("ldx", "ldxs"):
        a = _addr(regs.get(insn.src), insn.off)
        load = f"LD{form.size}({a}, {slot})"
        if kind == "ldxs":
            sign = hex(1 << (8 * form.size - 1))
            load = f"(({load} ^ {sign}) - {sign}) & {M64}"
        return [f"{regs.put(insn.dst)} = {load}"]
    if kind == "st":
        a = _addr(regs.get(insn.dst), insn.off)
        imm = insn.imm & ((1 << (8 * form.size)) - 1)
        return [f"ST{form.size}({a}, {hex(imm)}, {slot})"]
    if kind == "stx":
        a = _addr(regs.get(insn.dst), insn.off)
        src = regs.get(insn.src)
        stored = src if form.size == 8 else f"{src} & {hex((1 << (8 * form.size)) - 1)}"
        return [f"ST{form.size}({a}, {stored}, {slot})"]
    if kind == "atomic":
        return _atomic(slot, insn, form, regs)
    return None


def _atomic(slot: int, insn: Insn, form: Form, regs: _Regs) -> list[str]:
    size = form.size
    name = form.op
    if name == "load_acquire":
        a = _addr(regs.get(insn.src), insn.off)
        return [f"{regs.put(insn.dst)} = LDA({a}, {size}, {slot})"]
    a = _addr(regs.get(insn.dst), insn.off)
    src = regs.get(insn.src)
    if name == "store_release":
        return [f"STA({a}, {size}, {src}, {slot})"]
    if name == "cmpxchg":
        r0 = regs.get(0)
        return [f"{regs.put(0)} = CMPXCHG({a}, {size}, {r0}, {src}, {slot})"]
    call = f"ATOMIC({a}, {size}, A_{name}, {src}, {slot})"
    if form.fetch:
        return [f"{regs.put(insn.src)} = {call}"]
    return [call]


def _terminator(slot: int, insn: Insn, form: Form, regs: _Regs, starts: set[int]) -> list[str]:
    """The lines that end a block: jumps, calls, exit, legacy packet loads."""
    kind = form.kind
    nxt = slot + insn.slots
    if kind == "ja":
        return [f"return {_target(slot, slot + 1 + insn.off, starts)}"]
    if kind == "gotol":
        return [f"return {_target(slot, slot + 1 + insn.imm, starts)}"]
    if kind == "jcc":
        d, s, sd, ss = _operands(insn, form, regs)
        cond = sem.JUMPS[form.op][1].format(d=d, s=s, sd=sd, ss=ss)
        return [f"if {cond}: return {_target(slot, slot + 1 + insn.off, starts)}",
                f"return {_target(slot, nxt, starts)}"]
    if kind == "may_goto":
        return [f"if MAYGOTO(): return {_target(slot, slot + 1 + insn.off, starts)}",
                f"return {_target(slot, nxt, starts)}"]
    if kind == "exit":
        return [f"return EXIT({slot})"]
    if kind == "call":
        if insn.src == op.CALL_LOCAL:
            target = slot + 1 + insn.imm
            if target not in starts:
                return [f"return JUMPOUT({slot}, {target})"]
            return [f"return CALL({target}, {nxt}, {slot})"]
        if insn.src == op.CALL_KFUNC:
            return [f"return BAD({slot}, 'kfunc calls (call src 2) need the kernel')"]
        return [f"R[0] = HELPER({insn.imm}, {slot})", f"return {_target(slot, nxt, starts)}"]
    if kind == "callx":
        return [f"return CALLX({regs.get(insn.dst)}, {nxt}, {slot})"]
    if kind == "gotox":
        return [f"return GOTOX({regs.get(insn.dst)}, {slot})"]
    if kind in ("ldabs", "ldind"):
        where = str(insn.imm) if kind == "ldabs" else f"{regs.get(insn.src)} + {insn.imm}"
        return [f"R[0] = LDPKT({where}, {form.size}, {slot})", f"return {_target(slot, nxt, starts)}"]
    return [f"return BAD({slot}, {('cannot run ' + kind)!r})"]  # pragma: no cover
