"""A small static check of helper calls, run before loading.

The kernel's verifier reports a bad helper argument as an instruction index
and a register state dump.  This pass catches the common mistakes earlier and
names the Python (or ``.s``) line that emitted the call:

* a register read before it was written;
* a map where a map is expected (and not elsewhere);
* a pointer to initialised stack memory of the right size where a key, a
  value or input memory is expected (the size comes from the map, or from the
  constant in the following size argument);
* stack memory the helper writes into that lies inside the 512-byte frame;
* a GPL-only helper in a program whose licence is not GPL-compatible;
* a dereference of a map value that may still be NULL.

It is deliberately conservative: it follows every path with a simple
abstract state (register kinds, constants, initialised stack bytes), forgets
what it cannot know, and reports only what is certainly wrong.  The kernel's
verifier stays the judge of everything else.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn

    _Fail = Callable[[str], NoReturn]
    _Step = list[tuple["int | None", "_State"]]

from ..errors import ProgramError
from ..isa import Insn, classify, helper as _helper, opcodes as op
from ..isa.insn import jump_offset
from .._record import Record, record

GPL_COMPATIBLE = {"GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL",
                  "Dual MPL/GPL"}


@record
class Val(Record):
    """Abstract value of a register."""

    kind: str                 # uninit scalar ctx stack map map_value map_value_or_null func unknown
    const: int | None = None  # for scalar: known value; for stack: offset from r10
    ref: str | None = None    # map name for map*, function for func


UNINIT = Val("uninit")
UNKNOWN = Val("unknown")
SCALAR = Val("scalar")


def _join(a: Val, b: Val) -> Val:
    if a == b:
        return a
    if a.kind == b.kind:
        if a.kind == "map_value_or_null" or a.kind == "map_value":
            return Val(a.kind, None, a.ref if a.ref == b.ref else None)
        if a.kind == "stack":
            return UNKNOWN
        return Val(a.kind)
    if {a.kind, b.kind} == {"map_value", "map_value_or_null"}:
        return Val("map_value_or_null", None, a.ref if a.ref == b.ref else None)
    if "uninit" in (a.kind, b.kind):
        return UNINIT if a.kind == b.kind else UNKNOWN
    return UNKNOWN


class _State:
    __slots__ = ("regs", "init")

    def __init__(self, regs: tuple[Val, ...], init: frozenset[int]) -> None:
        self.regs = regs
        self.init = init  # initialised stack bytes, as negative offsets from r10

    def join(self, other: "_State") -> "_State":
        return _State(tuple(_join(a, b) for a, b in zip(self.regs, other.regs)),
                      self.init & other.init)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _State) and self.regs == other.regs and self.init == other.init


def _describe(v: Val) -> str:
    return {
        "uninit": "never written", "scalar": "a number", "ctx": "the context pointer",
        "stack": f"a stack pointer (r10 {v.const:+d})" if v.const is not None else "a stack pointer",
        "map": f"the map {v.ref!r}", "map_value": "a map value pointer",
        "map_value_or_null": "a map value pointer that may be NULL (not checked yet)",
        "func": "a function pointer", "unknown": "unknown",
    }.get(v.kind, v.kind)


def check_program(insns: list[Insn], *, license: str = "GPL", maps: dict[str, Any] | None = None,
                  ctx_size: int | None = None) -> None:
    """Check ``insns`` (a finalised program) and raise :class:`ProgramError`
    at the first certain mistake.  ``maps`` maps names to objects with
    ``key_size``/``value_size`` (optional, for size checks)."""
    maps = maps or {}
    gpl = license in GPL_COMPATIBLE
    # slot -> instruction index
    slot_of: list[int] = []
    index_at_slot: dict[int, int] = {}
    pos = 0
    for i, insn in enumerate(insns):
        slot_of.append(pos)
        index_at_slot[pos] = i
        pos += insn.slots
    # functions: main at 0 plus every local call target starts a fresh frame
    entries = {0}
    for i, insn in enumerate(insns):
        if insn.code == op.OP_CALL and insn.src == op.CALL_LOCAL:
            t = index_at_slot.get(slot_of[i] + insn.imm + 1)
            if t is not None:
                entries.add(t)
    for entry in sorted(entries):
        regs = [UNINIT] * 11
        regs[10] = Val("stack", 0)
        if entry == 0:
            regs[1] = Val("ctx")
        else:
            for r in range(1, 6):
                regs[r] = UNKNOWN
        _walk(insns, entry, _State(tuple(regs), frozenset()), slot_of, index_at_slot, gpl, maps)


def _walk(insns: list[Insn], entry: int, start: _State, slot_of: list[int],
          index_at_slot: dict[int, int], gpl: bool, maps: dict[str, Any]) -> None:
    states: dict[int, _State] = {entry: start}
    work = [entry]
    visits: dict[int, int] = {}
    while work:
        i = work.pop()
        state = states[i]
        visits[i] = visits.get(i, 0) + 1
        if visits[i] > 64:  # give up widening on pathological loops
            continue
        for j, new in _step(insns, i, state, slot_of, index_at_slot, gpl, maps):
            if j is None or j >= len(insns):
                continue
            old = states.get(j)
            merged = new if old is None else old.join(new)
            if old is None or merged != old:
                states[j] = merged
                work.append(j)


def _step(insns: list[Insn], i: int, st: _State, slot_of: list[int],
          index_at_slot: dict[int, int], gpl: bool, maps: dict[str, Any]) -> _Step:
    insn = insns[i]
    try:
        form = classify(insn)
    except Exception:
        return []
    regs = list(st.regs)
    init = st.init
    kind = form.kind
    nxt = i + 1

    def fail(msg: str) -> NoReturn:
        raise ProgramError(msg, insn.origin)

    def use(r: int, what: str) -> Val:
        v = regs[r]
        if v.kind == "uninit":
            fail(f"{what} reads r{r}, which is never written on some path before this instruction")
        return v

    def target_index() -> int | None:
        return index_at_slot.get(slot_of[i] + jump_offset(insn) + 1)

    if kind in ("neg", "end"):
        dv = use(insn.dst, form.op)
        regs[insn.dst] = SCALAR if dv.kind == "scalar" else UNKNOWN
        return [(nxt, _State(tuple(regs), init))]
    if kind in ("alu", "movsx"):
        d = insn.dst
        if form.op == "mov" and not form.reg:
            regs[d] = Val("scalar", insn.imm if form.alu64 else insn.imm & 0xFFFFFFFF)
        elif form.op in ("mov", "movsx"):
            src = use(insn.src, form.op)
            regs[d] = src if form.alu64 and form.op == "mov" else SCALAR
        else:
            dv = use(d, form.op)
            sv = use(insn.src, form.op) if form.reg else Val("scalar", insn.imm)
            if dv.kind == "stack" and form.op in ("add", "sub") and sv.kind == "scalar" \
                    and sv.const is not None and dv.const is not None and form.alu64:
                regs[d] = Val("stack", dv.const + (sv.const if form.op == "add" else -sv.const))
            elif dv.kind == "scalar" and sv.kind == "scalar":
                regs[d] = SCALAR
            elif dv.kind in ("map_value", "ctx", "stack") and form.op in ("add", "sub"):
                regs[d] = Val(dv.kind, None, dv.ref) if dv.kind != "stack" else UNKNOWN
            else:
                regs[d] = SCALAR if dv.kind == "scalar" else UNKNOWN
        return [(nxt, _State(tuple(regs), init))]
    if kind == "lddw":
        if insn.src in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_IDX):
            regs[insn.dst] = Val("map", None, insn.map_ref)
        elif insn.src in (op.PSEUDO_MAP_VALUE, op.PSEUDO_MAP_IDX_VALUE):
            regs[insn.dst] = Val("map_value", None, insn.map_ref)
        elif insn.src == op.PSEUDO_FUNC:
            regs[insn.dst] = Val("func")
        elif insn.src == op.PSEUDO_IMM64:
            regs[insn.dst] = Val("scalar", insn.imm64)
        else:
            regs[insn.dst] = UNKNOWN
        return [(nxt, _State(tuple(regs), init))]
    if kind in ("ldx", "ldxs"):
        base = use(insn.src, "load")
        if base.kind == "map_value_or_null":
            fail(f"load through r{insn.src}, a map value that may be NULL: "
                 f"test it (e.g. if r{insn.src} == 0 goto out) before dereferencing")
        regs[insn.dst] = UNKNOWN if form.size == 8 and base.kind not in ("ctx",) else SCALAR
        return [(nxt, _State(tuple(regs), init))]
    if form.op == "load_acquire":  # dst = *(src + off)
        base = use(insn.src, "load_acquire")
        if base.kind == "map_value_or_null":
            fail(f"load through r{insn.src}, a map value that may be NULL: test it first")
        regs[insn.dst] = UNKNOWN
        return [(nxt, _State(tuple(regs), init))]
    if kind in ("st", "stx", "atomic"):
        base = use(insn.dst, "store")
        if kind != "st":
            use(insn.src, "store")
        if base.kind == "map_value_or_null":
            fail(f"store through r{insn.dst}, a map value that may be NULL: test it first")
        if form.op == "cmpxchg":
            use(0, "cmpxchg")
            regs[0] = SCALAR
        elif form.fetch and kind == "atomic":
            regs[insn.src] = SCALAR
        if base.kind == "stack" and base.const is not None:
            lo = base.const + insn.off
            init = init | frozenset(range(lo, lo + form.size))
        return [(nxt, _State(tuple(regs), init))]
    if kind in ("ldabs", "ldind"):
        regs[0] = SCALAR
        for r in range(1, 6):
            regs[r] = UNINIT
        return [(nxt, _State(tuple(regs), init))]
    if kind == "exit":
        use(0, "exit (the return value is r0)")
        return []
    if kind in ("ja", "gotol"):
        return [(target_index(), _State(tuple(regs), init))]
    if kind == "may_goto":
        return [(nxt, _State(tuple(regs), init)), (target_index(), _State(tuple(regs), init))]
    if kind == "jcc":
        dv = use(insn.dst, form.op)
        if form.reg:
            use(insn.src, form.op)
        taken = list(regs)
        fall = list(regs)
        if dv.kind == "map_value_or_null" and not form.reg and insn.imm == 0 and form.op in ("jeq", "jne"):
            nonnull = Val("map_value", None, dv.ref)
            null = Val("scalar", 0)
            if form.op == "jeq":
                taken[insn.dst], fall[insn.dst] = null, nonnull
            else:
                taken[insn.dst], fall[insn.dst] = nonnull, null
        return [(nxt, _State(tuple(fall), init)), (target_index(), _State(tuple(taken), init))]
    if kind == "call":
        if insn.src == op.CALL_HELPER:
            init = init | _check_call(insn, regs, init, gpl, maps, fail)
        regs[0] = UNKNOWN
        if insn.src == op.CALL_HELPER:
            try:
                h = _helper(insn.imm)
                if h.ret == "ptr" and h.args[:1] == ("map",):
                    mref = regs[1].ref if regs[1].kind == "map" else None
                    regs[0] = Val("map_value_or_null", None, mref)
                elif h.ret == "scalar":
                    regs[0] = SCALAR
            except KeyError:
                pass
        for r in range(1, 6):
            regs[r] = UNINIT
        return [(nxt, _State(tuple(regs), init))]
    return [(nxt, _State(tuple(regs), init))]


def _check_call(insn: Insn, regs: list[Val], init: frozenset[int], gpl: bool,
                maps: dict[str, Any], fail: _Fail) -> frozenset[int]:
    """Check one helper call; return the stack bytes the helper writes (its
    output buffers of known size), which count as initialised afterwards."""
    try:
        h = _helper(insn.imm)
    except KeyError:
        fail(f"call of unknown helper id {insn.imm}")
    if h.id == 0:
        fail("helper id 0 (unspec) cannot be called")
    name = h.c_name
    if h.gpl_only and not gpl:
        fail(f"{name} is GPL-only: the program's licence must be GPL-compatible (e.g. license='GPL')")
    args = [a for a in h.args if a != "varargs"]
    map_obj = None
    written: frozenset[int] = frozenset()
    for n, kind in enumerate(args, start=1):
        v = regs[n]
        where = f"{name} argument {n} (r{n})"
        if v.kind == "uninit":
            fail(f"{where} is never set before the call; {name} takes {len(args)} argument(s): "
                 f"{', '.join(args)}")
        if v.kind == "unknown":
            continue
        if kind == "map":
            if v.kind != "map":
                fail(f"{where} must be a map (load it with ld_map), but it is {_describe(v)}")
            map_obj = maps.get(v.ref) if v.ref else None
        elif kind == "ctx":
            if v.kind != "ctx":
                fail(f"{where} must be the context pointer (r1 at entry; save it in r6), "
                     f"but it is {_describe(v)}")
        elif kind in ("map_key", "map_value"):
            size = getattr(map_obj, "key_size" if kind == "map_key" else "value_size", None)
            _check_mem(where, v, size, init, True, fail,
                       f"an initialised {kind.split('_')[1]}")
        elif kind == "uninit_map_value":
            size = getattr(map_obj, "value_size", None)
            _check_mem(where, v, size, init, False, fail, "value-sized memory")
            if v.kind == "stack" and v.const is not None and size:
                written = written | frozenset(range(v.const, v.const + size))
        elif kind in ("mem", "uninit_mem"):
            size = None
            if n < len(args) and args[n] == "size":
                sv = regs[n + 1]
                if sv.kind == "scalar" and sv.const is not None:
                    size = sv.const
            _check_mem(where, v, size, init, kind == "mem", fail,
                       "initialised memory" if kind == "mem" else "writable memory")
            if kind == "uninit_mem" and v.kind == "stack" and v.const is not None and size:
                written = written | frozenset(range(v.const, v.const + size))
        elif kind in ("size", "scalar"):
            if v.kind in ("map", "ctx", "stack", "map_value_or_null") and kind == "size":
                fail(f"{where} must be a size (a number), but it is {_describe(v)}")
    return written


def _check_mem(where: str, v: Val, size: int | None, init: frozenset[int], must_init: bool,
               fail: _Fail, what: str) -> None:
    if v.kind in ("map_value", "unknown"):
        return
    if v.kind == "map_value_or_null":
        fail(f"{where} may be NULL: test the map lookup result before passing it")
    if v.kind != "stack":
        fail(f"{where} must point to {what} (e.g. on the stack: r10 - N), but it is {_describe(v)}")
    if v.const is None:
        return
    lo = v.const
    if size is not None:
        if lo < -op.STACK_SIZE or lo + size > 0:
            fail(f"{where}: {size} bytes at r10 {lo:+d} fall outside the 512-byte stack")
        if must_init:
            missing = [b for b in range(lo, lo + size) if b not in init]
            if missing:
                fail(f"{where}: {size} bytes at r10 {lo:+d} must be initialised, but byte "
                     f"r10 {missing[0]:+d} is never written before the call")
    elif lo >= 0 or lo < -op.STACK_SIZE:
        fail(f"{where}: r10 {lo:+d} is outside the stack")
    elif must_init and lo not in init:
        fail(f"{where}: the memory at r10 {lo:+d} must be initialised, but it is never "
             f"written before the call")
