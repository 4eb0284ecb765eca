"""The programs of a recipe, generated with the DSL (correct by construction
for the verifier): one per probe, or for a probe whose actions need the
function's entry and return (``latency``, ``retval`` on a ``uprobe:``, the
arguments at a return) an entry program that saves the time and arguments
by thread and a return program that runs the actions.

Every section of a generated program is marked: its instructions get the
origin ``<probe: what it does>`` (a verifier complaint names the action)
and :meth:`Trace.show <pyebpf.trace.recipes.Trace.show>` comments its first
instruction.
"""
from __future__ import annotations

from typing import Callable, Sequence, cast

from ..errors import ProgramError
from ..program import R0, R1, R2, R6, R7, R8, R9, R10, Program
from ..lang import aggregations as _agg
from .expr import PROBE, STR, EmitEnv, Expr, ExprError, emit_bytes, emit_filter, emit_int
from .model import MAX_KEYS, Built
from ..probes.sources import UprobeSource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..maps import MapSpec, StackTraceMap
    from .model import Source
    from .recipes import Trace

__all__ = ["generate", "marker", "emit_struct"]

#: bytes of stack a key or an event record may take (the rest is the actions')
STRUCT_STACK = 448


def marker(p: Program, probe: str) -> Callable[[str | None], None]:
    """``mark(text)`` starts a section of ``p``'s code: its instructions get
    the origin ``<probe: text>`` (a verifier complaint names the action) and
    the section's first instruction gets ``text`` as its comment (which
    :meth:`Trace.show` prints).  ``mark(None)`` closes the last section."""
    start: int | None = None
    current: str | None = None

    def mark(text: str | None) -> None:
        nonlocal start, current
        if start is not None and current is not None:
            origin = f"<{probe}: {current}>"
            for insn in p.insns[start:]:
                insn.origin = origin
            if start < len(p.insns):
                p.insns[start].comment = current
        start, current = len(p.insns), text
    return mark


def generate(t: Trace, i: int, src: Source) -> list[Built]:
    """The programs of probe ``i`` of ``t`` (resolved to ``src``): one, or
    an entry and a return program (then ``t`` gets the start map that links
    them, described, in ``t._start_maps``)."""
    spec = str(t.specs[i])
    if not (t._paired(src) and isinstance(src, UprobeSource)):    # (only uprobes pair)
        return [Built(spec, src, _actions(t, i, src, None, []), "direct")]
    entry, ret = src.entry(), src.ret()
    used: set[int] = set().union(*(e.args_used() for e in t._exprs()))
    saved = sorted(used)
    from ..maps import HashMap, MapSpec
    start = MapSpec(HashMap, "u64", f"<{1 + len(saved)}Q", max_entries=MAX_KEYS,
                    name=f"start{i}")
    t._start_maps.append(start)
    kept = f" and arg{', arg'.join(map(str, saved))}" if saved else ""
    return [Built(f"{spec} (entry: saves the time{kept})", entry,
                  _entry(t, i, entry, start, saved), "entry"),
            Built(f"{spec} (return: runs the actions)", ret,
                  _actions(t, i, ret, start, saved), "return")]


def _pid_filter(t: Trace, p: Program, out: str) -> None:
    if t.pid:
        p.call("get_current_pid_tgid")
        p.rsh(R0, 32)
        p.jne(R0, t.pid, out)


def _entry(t: Trace, i: int, src: UprobeSource, start: MapSpec, saved: list[int]) -> Program:
    """The entry program: ``start[thread] = (now, saved arguments...)``."""
    p = Program(f"entry{i}")
    mark = marker(p, str(t.specs[i]) + " entry")
    mark("keep the context")
    p.mov(R6, R1)
    if t.pid:
        mark(f"only pid {t.pid}")
    _pid_filter(t, p, "out")
    mark("start[thread] = (now" + "".join(f", arg{n}" for n in saved) + ")")
    val = p.stack.alloc(8 * (1 + len(saved)))
    for j, n in enumerate(saved):
        src.emit_arg(p, R7, n, R6)
        p.stxdw(R10, val + 8 + 8 * j, R7)
    p.call("ktime_get_ns")
    p.stxdw(R10, val, R0)
    p.call("get_current_pid_tgid")
    key = p.stack_store(R0, 8)
    p.map_update(start, key, val, flags=0)
    p.label("out")
    mark("return 0")
    p.ret(0)
    mark(None)
    return p


def _actions(t: Trace, i: int, src: Source, start: MapSpec | None, saved: list[int]) -> Program:
    """The program that runs the actions (filters, aggregations, the event)."""
    p = Program(f"probe{i}")
    mark = marker(p, str(t.specs[i]))
    mark("keep the context")
    p.mov(R6, R1)
    stack_map = cast("StackTraceMap | MapSpec | None", t._stack_map)   # (described)
    env = EmitEnv(ctx=R6, source=src, probe_index=i, func_base=t._func_base[i],
                  stack_map=stack_map, at_return=start is not None, start_ns=t.start_ns)
    if t.pid:
        mark(f"only pid {t.pid}")
    _pid_filter(t, p, "out")
    if start is not None:
        mark("take start[thread] (saved at the entry); latency = now - its time")
        _take_start(p, start, saved, env)
    for f in t.filters:
        mark(f"filter: {f.text}")
        emit_filter(p, f, env, "out", R7, R8)
    _aggregations(t, p, env, mark)
    if t.event_fields is not None:
        exprs = [e for _, e in t.event_fields]
        mark(f"event: probe, {', '.join(e.text for e in exprs)} -> "
             f"{'ring buffer' if t.ring else 'perf buffer'}")
        rec = emit_struct(p, [Expr("probe", PROBE, "probe")] + exprs, env)
        size = 8 + sum(e.slot_size for e in exprs)
        if t.ring:
            p.ringbuf_output(t._events_map, rec, size, drops=t._drops)
        else:
            p.perf_event_output(t._events_map, rec, size, ctx=R6)
    p.label("out")
    mark("return 0")
    p.ret(0)
    mark(None)
    return p


def _take_start(p: Program, start: MapSpec, saved: list[int], env: EmitEnv) -> None:
    """Copy and delete ``start[thread]``; ``latency`` and the saved
    arguments are then read from the copy (through ``env``)."""
    p.call("get_current_pid_tgid")
    key = p.stack_store(R0, 8)
    n = 1 + len(saved)
    copy = p.stack.alloc(8 * n)
    p.map_lookup(start, key, "out", dst=R7)
    for j in range(n):
        p.ldxdw(R1, R7, 8 * j)
        p.stxdw(R10, copy + 8 * j, R1)
    p.ld_map(R1, start)
    p.stack_pointer(R2, key)
    p.call("map_delete_elem")
    p.call("ktime_get_ns")
    p.ldxdw(R1, R10, copy)
    p.sub(R0, R1)
    env.latency_slot = p.stack_store(R0, 8)
    env.saved_args = {n_: copy + 8 + 8 * j for j, n_ in enumerate(saved)}


def _aggregations(t: Trace, p: Program, env: EmitEnv, mark: Callable[[str | None], None]
                  ) -> None:
    """Update every aggregation (keys shared by aggregations built once)."""
    keys_at: dict[tuple[str, ...], int] = {}
    for a in t.aggregates:
        key_off = None
        if a.keys:
            sig = tuple(k.text for k in a.keys)
            key_off = keys_at.get(sig)
            if key_off is None:
                mark(f"key: {', '.join(sig)}")
                key_off = keys_at[sig] = emit_struct(p, a.keys, env)
        keytext = f"[{', '.join(k.text for k in a.keys)}]" if a.keys else ""
        arg = a.value.text if a.value is not None else ""
        if a.linear:
            arg += ", " + ", ".join(map(str, a.linear))
        mark(f"{a.display}{keytext} = {a.kind}({arg})")
        impl = a.aggregation()
        if isinstance(impl, _agg.Count):
            impl.emit(p, key=key_off)
        elif a.value is not None:
            emit_int(p, a.value, R7, env)
            impl.emit(p, R7, key=key_off)
        else:                                   # (Trace._add refuses it)
            raise ExprError(f"{a.kind}() needs a value")


def emit_struct(p: Program, exprs: Sequence[Expr], env: EmitEnv) -> int:
    """Lay ``exprs`` out on the stack (8-byte slots, strings padded); return
    the offset."""
    size = sum(e.slot_size for e in exprs)
    if size > STRUCT_STACK:
        raise ProgramError(f"the values {', '.join(e.text for e in exprs)} need {size} bytes "
                           "of stack; use shorter strings (--strlen / str(x, N))")
    base = p.stack.alloc(size)
    pos = base
    for e in exprs:
        if e.kind == STR:
            emit_bytes(p, e, pos, env, R9)
        else:
            emit_int(p, e, R9, env)
            p.stxdw(R10, pos, R9)
        pos += e.slot_size
    return base
