"""Code generation: a typed bpftrace tree becomes eBPF programs, map
descriptions and a table of the actions user space performs.

Decisions (issue 14):

- **One program per resolved probe**, built with the DSL
  (:class:`pyebpf.program.Program`) and its verifier-friendly idioms; the
  probe source (``emit_arg``, ``emit_retval``, ``emit_field``...) reads
  arguments, so every probe kind reads them the way ``pyebpf trace`` does.
  BEGIN and END are ``BPF_PROG_TYPE_RAW_TRACEPOINT`` programs that the
  runtime runs once with ``BPF_PROG_TEST_RUN`` (every helper they need --
  maps, the ring buffer, time, pid, comm -- is allowed there).
- **Registers**: r6 keeps the context; r7-r9 hold intermediate integers
  (a small pool; an expression deeper than the pool spills to the stack);
  r0-r5 are the helpers' scratch registers.
- **Scratch variables** (``$x``) live on the stack, one slot per variable of
  the probe, zeroed at the probe's start (the verifier wants initialised
  stack); strings and tuples are bytes on the stack with the sizes their
  types give (:mod:`pyebpf.lang.layout`).
- **Maps**: one BPF map per ``@name``. Plain values: a hash map from the
  key's bytes (8 zero bytes for a map without key) to the value's bytes
  (integers as 8 bytes). Aggregations use :mod:`pyebpf.lang.aggregations`
  (per-CPU hash maps, summed when read); a histogram's key carries the
  bucket after the map key.
- **Events**: one BPF ring buffer for everything user space does
  (printf, print, time, exit, clear, zero): a ring buffer keeps the order
  of events across CPUs, which the printing must follow, and BEGIN/END may
  use it (``bpf_perf_event_output`` needs a perf-event context). A record
  is an 8-byte action id then the arguments as a tuple of their types.
- **exit()** sends its event and ends the probe; the probes keep running
  until user space reads that event and detaches them (as in bpftrace:
  counts taken after an exit() still count), the events sent after it are
  dropped, then END runs and the maps are printed.
- **Conditions** (predicates, ``if``, ``while``, ``?:``) compile to
  conditional jumps, ``&&``/``||``/``!`` short-circuiting, without a 0/1
  value; ``%``, ``/``, ``*`` by a power of two become and/shifts (BPF's
  division is unsigned, as bpftrace's).
- **join()** builds its strings in a per-CPU scratch map (too big for the
  stack) and outputs them from there.
- **The context** stays in r1 when every use of it comes before r1 is
  first overwritten (the program is generated again that way), else r6.
- **Positions**: each instruction's ``origin`` is ``FILE:LINE:COLUMN`` of
  the statement (or predicate) it comes from, so a verifier rejection
  points at the script; each line's first instruction carries the line as
  its comment (``--show-program``).
- Everything here is pure: maps are :class:`~pyebpf.maps.MapSpec`, so
  showing the programs needs no privilege.

The generator of one probe is :class:`_ProbeGen` here (a program's
structure), made of parts: statements and conditions
(:mod:`~pyebpf.lang.codegen_control`), maps (:mod:`~pyebpf.lang.codegen_maps`),
calls as statements and events (:mod:`~pyebpf.lang.codegen_calls`), values
in memory (:mod:`~pyebpf.lang.codegen_values`), integer expressions
(:mod:`~pyebpf.lang.codegen_ints`), on a common base
(:mod:`~pyebpf.lang.codegen_base`).
"""
from __future__ import annotations

from .._record import dataclass, field
from ..errors import PyebpfError
from ..program import R1, R6, Program
from . import ast as A
from .codegen_base import (I64, JOIN_ARGS, JOIN_STRLEN, CodegenError, _const, _stored_value_type,
                           type_of)
from .codegen_calls import _CallGen
from .codegen_control import _ControlGen
from .codegen_ints import _IntGen
from .codegen_maps import _MapGen
from .codegen_records import _RecordGen
from .codegen_values import _ValueGen
from .layout import stored_size
from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, Sequence

__all__ = ["CodegenError", "MapPlan", "Action", "ProbePlan", "Unit", "generate",
           "MAX_MAP_ENTRIES", "RINGBUF_SIZE"]

#: entries per map (bpftrace's default for BPFTRACE_MAP_KEYS_MAX)
MAX_MAP_ENTRIES = 4096
#: bytes of the ring buffer that carries every event
RINGBUF_SIZE = 1 << 20
BPF_F_USER_STACK = 1 << 8


class MapPlan:
    """One ``@map``: its key and value types and the kernel map behind it
    (``spec`` for plain values, ``agg`` for aggregations)."""

    def __init__(self, name: str, key: Type | None, value: Type, index: int) -> None:
        self.name = name
        self.key = key
        self.value = value
        self.kind = value.kind if value.is_aggregation else "plain"
        self.key_size = stored_size(key) if key is not None else 8
        self.kname = "bt%d_%s" % (index, "".join(c if c.isalnum() else "_" for c in name[1:])[:8])
        self.agg: Any = None
        self.spec: Any = None
        self.value_size = 8
        # (a map without a key holds key 0 alone: made for one entry -- a per-CPU
        # hash map's preallocation of 4096 costs ~3 ms of kernel time at each start)
        entries = MAX_MAP_ENTRIES if key is not None else 1
        from ..maps import Bytes, HashMap, MapSpec
        if self.kind == "plain":
            if value.kind in ("count", "none"):
                raise CodegenError(f"map {name} has no value type")
            self.value_size = stored_size(_stored_value_type(value))
            from .aggregations import hash_map_flags
            self.spec = MapSpec(HashMap, Bytes(self.key_size), Bytes(self.value_size),
                                max_entries=entries, name=self.kname, flags=hash_map_flags())
            return
        from . import aggregations as agg
        kw: dict[str, Any] = dict(keyed=True, max_keys=entries, key_size=self.key_size,
                                  create=False)
        if self.kind in _AGGREGATIONS:
            self.agg = getattr(agg, _AGGREGATIONS[self.kind])(self.kname, **kw)
        elif self.kind == "hist":
            if key is None:        # a per-CPU array of buckets: no key, no insertion
                kw["keyed"] = False
            self.agg = agg.Histogram(self.kname, **kw)
        elif self.kind == "lhist":
            if value.lhist is None:
                raise CodegenError(f"map {name}: lhist without its (min, max, step)")
            lo, hi, step = value.lhist
            # bpftrace 0.17 counts a last partial step in [max, ...): the
            # trace layer's buckets do the same when max is cut to whole steps
            steps = (hi - lo) // step
            if steps < 1:
                raise CodegenError(f"map {name}: lhist needs max - min >= step")
            if key is None:
                kw["keyed"] = False
            self.agg = agg.Histogram(self.kname, linear=(lo, lo + steps * step, step), **kw)
        self.spec = self.agg.map

    @property
    def keyed(self) -> bool:
        """True when the map has a key (``@m[k]``)."""
        return self.key is not None

    def __repr__(self) -> str:
        return f"<MapPlan {self.name} key={self.key} value={self.value} ({self.kname})>"


#: the bpftrace aggregations that are one :mod:`pyebpf.lang.aggregations` class
#: made without options: kind -> the class's name
_AGGREGATIONS = {"count": "Count", "sum": "Sum", "min": "Min", "max": "Max", "avg": "Avg",
                 "stats": "Stats"}



@dataclass(eq=False)
class Action:
    """Something user space does when an event arrives: ``kind`` (printf,
    print, print_value, time, exit, clear, zero, join), the format (printf,
    time, join), the map (print, clear, zero) and its ``params`` (print's
    top and div), the argument types, and ``record``: the type the event's
    bytes have after the 8-byte id (None without arguments)."""
    id: int
    kind: str
    pos: A.Pos
    fmt: str = field(default="", kw_only=True)
    args: list[Type] = field(default_factory=list, kw_only=True)
    map: str | None = field(default=None, kw_only=True)
    params: list[int] = field(default_factory=list, kw_only=True)
    #: argument index -> strftime format (the value printed is (format, nsecs))
    strftime: dict[int, str] = field(default_factory=dict, kw_only=True)

    def __post_init__(self) -> None:
        self.record = Type("tuple", elems=tuple(self.args)) if self.args else None

    def __repr__(self) -> str:
        return f"<Action {self.id} {self.kind} {self.fmt!r} {self.map or ''}>"


class ProbePlan:
    """One program: the resolved probe's ``name`` (what ``probe`` prints),
    its ``source`` (None for BEGIN/END), the ``kind`` (``BEGIN``, ``END``
    or ``probe``) and the :class:`Program`."""

    def __init__(self, name: str, kind: str, source: Any, program: Program,
                 node: A.Probe) -> None:
        self.name = name
        self.kind = kind
        self.source = source
        self.program = program
        self.node = node

    def load_args(self) -> tuple[int, dict[str, int]]:
        """``(prog_type, extra load options)`` for :func:`pyebpf.loader.load`."""
        if self.source is None:
            from ..kernel.constants import ProgType
            return int(ProgType.RAW_TRACEPOINT), {}
        opts = dict(self.source.load_options)
        ptype = opts.pop("prog_type", self.source.prog_type)
        return int(ptype), opts


class Unit:
    """Everything generated from one script: the programs (in script
    order), the maps (``@name`` -> :class:`MapPlan`), the actions by id,
    the ring buffer's description and the probe names."""

    def __init__(self, script: A.Script) -> None:
        from ..maps import MapSpec, RingBuf
        self.script = script
        self.probes: list[ProbePlan] = []
        self.maps: dict[str, MapPlan] = {}
        self.actions: list[Action] = []
        self.ringbuf = MapSpec(RingBuf, RINGBUF_SIZE, name="bt_events")
        self.stack_map: Any = None
        self.kstack_map: Any = None
        #: the maps of ``pystack`` by role (pyebpf.lang.pystack), made on first use
        self.pystacks: dict[str, Any] = {}
        self.join_map: Any = None
        self.probe_names: list[str] = []
        #: why each uprobe that names a missing function was left out
        self.skipped: list[str] = []
        #: a per-CPU u64 counting the events the ring buffer refused (None: not counted)
        self.drops: Any = None
        #: bpftrace's -k (1: map updates and deletes) / -kk (2: also lookups and
        #: memory reads): a failed helper sends a helper_error event
        self.helper_check = 0

    def action(self, kind: str, pos: A.Pos, **kw: Any) -> Action:
        """A new action (its id is its index)."""
        a = Action(len(self.actions), kind, pos, **kw)
        self.actions.append(a)
        return a

    def join_scratch(self) -> Any:
        """The per-CPU scratch map ``join()`` builds its event in (described)."""
        if self.join_map is None:
            from ..maps import Bytes, MapSpec, PerCpuArrayMap
            self.join_map = MapSpec(PerCpuArrayMap, Bytes(8 + JOIN_ARGS * JOIN_STRLEN), 1,
                                    name="bt_join")
        return self.join_map

    def stacks(self, kind: str) -> Any:
        """The stack-trace map of ``kind`` (``ustack``: build ids and file
        offsets, symbolized even after the process is gone; ``kstack``:
        addresses), described, made on first use."""
        if kind == "ustack":
            if self.stack_map is None:
                from ..symbols.stacks import make_stack_map
                self.stack_map = make_stack_map(4096, 127, name="bt_ustacks", create=False)
            return self.stack_map
        if self.kstack_map is None:
            from ..maps import MapSpec, StackTraceMap
            self.kstack_map = MapSpec(StackTraceMap, 4096, 127, name="bt_kstacks")
        return self.kstack_map

    def pystack_maps(self) -> dict[str, Any]:
        """The maps of ``pystack`` (see :func:`pyebpf.lang.pystack.pystack_specs`)."""
        if not self.pystacks:
            from .pystack import pystack_specs
            self.pystacks = pystack_specs()
        return self.pystacks

    def all_map_specs(self) -> dict[str, Any]:
        """Kernel map name -> its description, for every map of the unit."""
        out = {m.kname: m.spec for m in self.maps.values()}
        out[self.ringbuf.name] = self.ringbuf
        for m in (self.stack_map, self.kstack_map, self.join_map, self.drops,
                  *self.pystacks.values()):
            if m is not None:
                out[m.name] = m
        return out


# ============================================================== entry point
def generate(script: A.Script, analysis: Any = None, *, resolve: Any = None,
             cpid: int | None = None, params: Sequence[str] = (),
             start_ns: int = 0, count_drops: bool = False, helper_check: int = 0) -> Unit:
    """Generate the programs of ``script`` (typed by the semantic pass,
    whose :class:`Analysis` gives the maps' types; without it, the map
    types are taken from the assignments).

    ``resolve(ap) -> list of (name, source)`` resolves an attach point to
    concrete probes (BEGIN/END never reach it). ``cpid`` is the ``-c``
    command's pid; ``start_ns`` the ``CLOCK_MONOTONIC`` time ``elapsed``
    counts from; ``count_drops``: events the ring buffer refuses are counted
    (``Unit.drops``); ``helper_check``: bpftrace's ``-k`` level (0, 1, 2:
    see :attr:`Unit.helper_check`)."""
    unit = Unit(script)
    unit.helper_check = helper_check
    if count_drops:
        from ..maps import MapSpec, PerCpuArrayMap
        unit.drops = MapSpec(PerCpuArrayMap, "u64", 1, name="bt_drops")
    infos = getattr(analysis, "maps", None) or _infer_maps(script)
    for i, (name, info) in enumerate(sorted(infos.items())):
        unit.maps[name] = MapPlan(name, info.key, info.value, i)
    ctx = _Context(unit, cpid, list(params), start_ns, analysis)
    for probe in script.probes:
        for ap in probe.attach_points:
            if ap.provider in ("BEGIN", "END"):
                targets: list[tuple[str, Any]] = [(ap.provider, None)]
            else:
                if resolve is None:
                    raise CodegenError(f"no resolver for probe {ap.raw}", ap.pos)
                targets = list(resolve(ap))
            for name, source in targets:
                index = len(unit.probe_names)
                unit.probe_names.append(name)
                kind = ap.provider if source is None else "probe"
                gen = _ProbeGen(ctx, probe, name, index, source, kind)
                prog = gen.build()
                if gen.ctx_stays_in_r1():
                    try:
                        prog = _ProbeGen(ctx, probe, name, index, source, kind, True).build()
                    except PyebpfError:    # (a source that wants the context in r6-r9)
                        pass
                unit.probes.append(ProbePlan(name, kind, source, prog, probe))
                if getattr(source, "setup", None) is not None:
                    unit.probes.append(_watch_setup(ctx, probe, name, index, source,
                                                    len(unit.probes) - 1))
    unit.skipped = [ap.missing for p in script.probes for ap in p.attach_points if ap.missing]
    if not unit.probes and unit.skipped:      # (bpftrace 0.17 skips them, unless all are)
        raise CodegenError("No probes to attach: " + "; ".join(unit.skipped))
    return unit


def _watch_setup(ctx: _Context, probe: A.Probe, name: str, index: int, source: Any,
                 watch: int) -> ProbePlan:
    """The setup uprobe of the watchpoint ``source`` on ``FUNC+argN`` (the
    program of ``unit.probes[watch]``): it stops the process (SIGSTOP; not
    for an asyncwatchpoint), then sends ``watch`` and the argument's value
    for user space to place the watchpoint (:mod:`pyebpf.lang.watchpoints`)."""
    pos = probe.pos
    stmts: list[A.Stmt] = []
    if not source.asynchronous:
        stmts.append(A.ExprStmt(pos, A.Call(pos, "signal", [A.Integer(pos, 19)])))
    arg = A.Builtin(pos, f"arg{source.arg}", type=int_type(8, False))
    stmts.append(A.ExprStmt(pos, A.Call(pos, "__watch", [A.Integer(pos, watch), arg])))
    node = A.Probe(pos, probe.attach_points, None, A.Block(pos, stmts))
    prog = _ProbeGen(ctx, node, name, index, source.setup, "watch_setup").build()
    return ProbePlan(name, "watch_setup", source.setup, prog, node)


class _MapInfo:
    """A map's key and value types (what sema's MapInfo gives)."""

    def __init__(self, name: str, key: Type | None, value: Type) -> None:
        self.name, self.key, self.value = name, key, value


def _infer_maps(script: A.Script) -> dict[str, _MapInfo]:
    """Map types from the assignments, for a tree the semantic pass has not
    seen (tests build such trees by hand)."""
    found: dict[str, _MapInfo] = {}

    def widened(t: Type) -> Type:
        return string_type(64) if t.kind == "string" else t

    def key_type(m: A.Map) -> Type | None:
        if not m.keys:
            return None
        if len(m.keys) == 1:
            return widened(type_of(m.keys[0]))
        return Type("tuple", elems=tuple(widened(type_of(k)) for k in m.keys))

    for p in script.probes:
        for s in _all_stmts(p.block.stmts):
            if isinstance(s, A.AssignMap):
                found.setdefault("@" + s.map.name, _MapInfo("@" + s.map.name, key_type(s.map),
                                                            widened(_value_type(s.value))))
            elif isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Unop) and \
                    isinstance(s.expr.operand, A.Map):
                m = s.expr.operand
                found.setdefault("@" + m.name, _MapInfo("@" + m.name, key_type(m), I64))
    return found


def _all_stmts(stmts: list[A.Stmt]) -> Iterator[A.Stmt]:
    """Every statement of ``stmts`` and of the blocks nested in them, in order
    (each before the ones inside it)."""
    for s in stmts:
        yield s
        if isinstance(s, A.If):
            yield from _all_stmts(s.then.stmts)
            if s.else_ is not None:
                yield from _all_stmts(s.else_.stmts)
        elif isinstance(s, (A.Unroll, A.While)):
            yield from _all_stmts(s.body.stmts)


def _value_type(e: A.Expr) -> Type:
    if isinstance(e, A.Call) and e.name in ("count", "sum", "min", "max", "avg", "stats",
                                            "hist", "lhist"):
        signed = bool(e.args) and type_of(e.args[0]).signed
        lh = None
        if e.name == "lhist":
            lh = tuple(_const(a) or 0 for a in e.args[1:4])
        return Type(e.name, 8, signed, lhist=lh)  # type: ignore[arg-type]
    return type_of(e)


class _Context:
    """What every probe's generator shares."""

    def __init__(self, unit: Unit, cpid: int | None, params: list[str], start_ns: int,
                 analysis: Any = None) -> None:
        self.unit = unit
        self.analysis = analysis
        self.cpid = cpid or 0
        self.params = params
        self.start_ns = start_ns


# ============================================================== one probe
class _ProbeGen(_ControlGen, _MapGen, _CallGen, _ValueGen, _RecordGen, _IntGen):
    """Generates the program of one resolved probe (its parts: statements,
    maps, calls, values, integers; the state: :class:`_GenBase`)."""

    # ---------------------------------------------------------- structure
    def build(self) -> Program:
        p = self.p
        self._comment_line(self.node.pos, f"{self.name}")
        if self.ctx_reg is R6:
            p.mov(R6, R1)
        self._declare_vars(self.node.block.stmts)
        if self.node.predicate is not None:
            start = len(p.insns)
            self._comment_line(self.node.predicate.pos)
            self.jump_if_false(self.node.predicate, "out")
            self.spans.append((start, len(p.insns), self.node.predicate.pos))
        self.block(self.node.block)
        p.label("out")
        p.ret(0)
        self._set_origins()
        p.drop_unreachable()    # (after a folded condition: the kernel refuses dead code)
        return p

    def ctx_stays_in_r1(self) -> bool:
        """True when the built program reads the context (r6) only before r1
        is first overwritten and has no backward jump: then a build with
        the context left in r1 is the same program, one instruction
        shorter."""
        from ..isa import opcodes as op
        insns = self.p.insns
        labels = self.p.labels
        for i, insn in enumerate(insns):
            if insn.target is not None and labels.get(insn.target, len(insns)) <= i:
                return False
        uses = [i for i, insn in enumerate(insns[1:], 1)
                if insn.src == 6 or (insn.dst == 6 and insn.code & 7 in (op.ST, op.STX))]
        if not uses:
            return True
        for insn in insns[1:uses[-1]]:
            cls = insn.code & 7
            if insn.code == op.OP_CALL or (insn.dst == 1 and cls in (op.ALU, op.ALU64, op.LD,
                                                                     op.LDX)):
                return False
        return True

    def _set_origins(self) -> None:
        insns = self.p.insns
        fname = self.script.filename
        for start, end, pos in sorted(self.spans, key=lambda s: s[0] - s[1]):
            origin = f"{fname}:{pos.line}:{pos.column}"
            for insn in insns[start:end]:
                insn.origin = origin
        probe_origin = f"{fname}:{self.node.pos.line}:{self.node.pos.column}"
        covered: set[int] = set()
        for start, end, _ in self.spans:
            covered.update(range(start, end))
        for i, insn in enumerate(insns):
            if i not in covered:
                insn.origin = probe_origin

    def _declare_vars(self, stmts: list[A.Stmt]) -> None:
        """A stack slot per scratch variable, of the type the semantic pass
        settled on (the widest string assigned), zeroed."""
        analysis_vars = getattr(self.ctx.analysis, "variables", None) or {}
        known: dict[str, Type] = analysis_vars.get(self.node, {})
        for s in _all_stmts(stmts):
            if isinstance(s, A.AssignVar) and s.var.name not in self.vars:
                t = known.get(s.var.name)
                if t is None:
                    t = s.var.type if isinstance(s.var.type, Type) else type_of(s.value)
                if t.kind == "int":
                    t = int_type(8, t.signed)
                size = stored_size(t)
                off = self.p.stack.alloc(size)
                self.vars[s.var.name] = (off, t)
        for off, t in self.vars.values():
            self._zero(off, stored_size(t))
