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
  (integers as 8 bytes). Aggregations use :mod:`pyebpf.trace.aggregate`
  (per-CPU hash maps, summed when read); a histogram's key carries the
  bucket after the map key.
- **Events**: one BPF ring buffer for everything user space does
  (printf, print, time, exit, clear, zero): a ring buffer keeps the order
  of events across CPUs, which the printing must follow, and BEGIN/END may
  use it (``bpf_perf_event_output`` needs a perf-event context). A record
  is an 8-byte action id then the arguments as a tuple of their types.
- **exit()** sets a one-element array flag that every probe program checks
  first (three instructions, no helper call), so that nothing runs after
  it -- deterministically, where bpftrace stops only once its reader has
  seen the event -- then sends its event; user space stops, runs END and
  prints the maps.
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
"""
from __future__ import annotations

from ..errors import ProgramError, PyebpfError
from ..program import R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, W0, Program, Reg
from ..trace.expr import HELPER_BUILTINS, emit_elapsed, emit_helper_builtin, emit_ustack_key
from . import ast as A
from .layout import size_align, stored_size, tuple_layout
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
#: join(): how many strings, of how many bytes (bpftrace 0.17's defaults)
JOIN_ARGS = 16
JOIN_STRLEN = 1024
U64 = int_type(8, False)
I64 = int_type(8, True)

#: bpftrace's reg() names (pt_regs' field names) -> the 64-bit registers
_BPFTRACE_REGS = {"ip": "rip", "sp": "rsp", "ax": "rax", "bx": "rbx", "cx": "rcx",
                  "dx": "rdx", "si": "rsi", "di": "rdi", "bp": "rbp", "flags": "eflags",
                  "orig_ax": "orig_rax"}

_BUILTIN_TYPES = {"pid": U64, "tid": U64, "uid": U64, "gid": U64, "cpu": U64, "nsecs": U64,
                  "elapsed": U64, "cgroup": U64, "cpid": U64, "rand": U64, "retval": I64,
                  "comm": string_type(16), "probe": Type("probe", 8), "func": Type("probe", 8)}


class CodegenError(ProgramError):
    """The script asks for something the code generator cannot produce;
    ``pos`` is where (a :class:`~pyebpf.lang.ast.Pos`) when known."""

    def __init__(self, message: str, pos: A.Pos | None = None) -> None:
        super().__init__(message)
        self.pos = pos


def type_of(e: A.Expr) -> Type:
    """The type the semantic pass gave ``e`` (a sensible default for trees
    built by hand without it: int64, or what the node obviously is)."""
    t = e.type
    if isinstance(t, Type):
        return t
    if isinstance(e, A.String):
        return string_type(len(e.value.encode()) + 1)
    if isinstance(e, A.Builtin):
        if e.name in ("ustack", "kstack"):
            return Type(e.name, 8)
        return _BUILTIN_TYPES.get(e.name, I64)
    if isinstance(e, A.Call) and e.name in ("ustack", "kstack"):
        mode = next((a.name for a in e.args if isinstance(a, A.Identifier)), "bpftrace")
        limit = next((a.value for a in e.args if isinstance(a, A.Integer)), 127)
        return Type(e.name, 8, stack_mode=mode, stack_limit=limit)
    if isinstance(e, A.Call) and e.name == "str":
        n = _const(e.args[1]) if len(e.args) > 1 else None
        return string_type(n + 1 if n is not None and 0 < n < 64 else 64)
    if isinstance(e, A.Tuple):
        return Type("tuple", elems=tuple(type_of(x) for x in e.elems))
    if isinstance(e, A.Binop) and e.op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||"):
        return U64
    if isinstance(e, A.Binop):
        lt, rt = type_of(e.left), type_of(e.right)
        return int_type(8, lt.signed and rt.signed)
    if isinstance(e, A.Cast):
        from .types import INT_NAMES
        size, signed = INT_NAMES.get(e.typename, (8, False))
        return int_type(size, signed)
    if isinstance(e, A.Ternary):
        return type_of(e.then)
    return I64


def _const(e: A.Expr) -> int | None:
    """The value of a constant integer expression, else None."""
    if isinstance(e, A.Integer):
        return e.value
    if isinstance(e, A.Unop) and e.op == "-" and not e.postfix:
        v = _const(e.operand)
        return None if v is None else -v
    return None


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


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
        from ..maps import Bytes, HashMap, MapSpec
        if self.kind == "plain":
            if value.kind in ("count", "none"):
                raise CodegenError(f"map {name} has no value type")
            self.value_size = stored_size(_stored_value_type(value))
            self.spec = MapSpec(HashMap, Bytes(self.key_size), Bytes(self.value_size),
                                max_entries=MAX_MAP_ENTRIES, name=self.kname)
            return
        from ..trace import aggregate as agg
        kw: dict[str, Any] = dict(keyed=True, max_keys=MAX_MAP_ENTRIES, key_size=self.key_size,
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


#: the bpftrace aggregations that are one :mod:`pyebpf.trace.aggregate` class
#: made without options: kind -> the class's name
_AGGREGATIONS = {"count": "Count", "sum": "Sum", "min": "Min", "max": "Max", "avg": "Avg",
                 "stats": "Stats"}


def _stored_value_type(t: Type) -> Type:
    """How a plain map value is stored: integers as 8 bytes."""
    if t.kind == "int":
        return int_type(8, t.signed)
    return t


class Action:
    """Something user space does when an event arrives: ``kind`` (printf,
    print, print_value, time, exit, clear, zero), the format (printf,
    time), the map (print, clear, zero), the argument types and the record
    type the event's bytes have after the 8-byte id."""

    def __init__(self, ident: int, kind: str, pos: A.Pos, *, fmt: str = "",
                 args: Sequence[Type] = (), map: str | None = None,
                 params: Sequence[int] = ()) -> None:
        # (duplicates: deliberate, plain attribute setting; record and strftime are derived)
        self.id = ident
        self.kind = kind
        self.pos = pos
        self.fmt = fmt
        self.args = list(args)
        self.map = map
        self.params = list(params)
        self.record = Type("tuple", elems=tuple(self.args)) if self.args else None
        #: argument index -> strftime format (the value printed is (format, nsecs))
        self.strftime: dict[int, str] = {}

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
        self.join_map: Any = None
        self.probe_names: list[str] = []
        #: a per-CPU u64 counting the events the ring buffer refused (None: not counted)
        self.drops: Any = None
        #: set by exit(): a one-element array every probe checks first, so
        #: that nothing runs after exit() (described when the script exits)
        self.exit_flag: Any = None
        if _calls_exit(script):
            from ..maps import ArrayMap
            self.exit_flag = MapSpec(ArrayMap, "u64", 1, name="bt_exit")

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
                from ..trace.stacks import make_stack_map
                self.stack_map = make_stack_map(4096, 127, name="bt_ustacks", create=False)
            return self.stack_map
        if self.kstack_map is None:
            from ..maps import MapSpec, StackTraceMap
            self.kstack_map = MapSpec(StackTraceMap, 4096, 127, name="bt_kstacks")
        return self.kstack_map

    def all_map_specs(self) -> dict[str, Any]:
        """Kernel map name -> its description, for every map of the unit."""
        out = {m.kname: m.spec for m in self.maps.values()}
        out[self.ringbuf.name] = self.ringbuf
        for m in (self.stack_map, self.kstack_map, self.join_map, self.drops):
            if m is not None:
                out[m.name] = m
        if self.exit_flag is not None:
            out[self.exit_flag.name] = self.exit_flag
        return out


def _calls_exit(script: A.Script) -> bool:
    """True when ``exit()`` appears in ``script``."""
    def visit(stmts: list[A.Stmt]) -> bool:
        for s in stmts:
            if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.name == "exit":
                return True
            if isinstance(s, A.If) and (visit(s.then.stmts) or
                                        (s.else_ is not None and visit(s.else_.stmts))):
                return True
            if isinstance(s, (A.Unroll, A.While)) and visit(s.body.stmts):
                return True
        return False
    return any(visit(p.block.stmts) for p in script.probes)


# ============================================================== entry point
def generate(script: A.Script, analysis: Any = None, *, resolve: Any = None,
             cpid: int | None = None, params: Sequence[str] = (),
             start_ns: int = 0, count_drops: bool = False) -> Unit:
    """Generate the programs of ``script`` (typed by the semantic pass,
    whose :class:`Analysis` gives the maps' types; without it, the map
    types are taken from the assignments).

    ``resolve(ap) -> list of (name, source)`` resolves an attach point to
    concrete probes (BEGIN/END never reach it). ``cpid`` is the ``-c``
    command's pid; ``start_ns`` the ``CLOCK_MONOTONIC`` time ``elapsed``
    counts from; ``count_drops``: events the ring buffer refuses are counted
    (``Unit.drops``)."""
    unit = Unit(script)
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
    return unit


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
class _Loop:
    def __init__(self, head: str, end: str) -> None:
        self.head, self.end = head, end


class _ProbeGen:
    """Generates the program of one resolved probe."""

    def __init__(self, ctx: _Context, probe: A.Probe, name: str, index: int, source: Any,
                 kind: str, ctx_in_r1: bool = False) -> None:
        self.ctx = ctx
        self.unit = ctx.unit
        self.node = probe
        self.name = name
        self.index = index
        self.source = source
        self.kind = kind
        self.p = Program(f"bt{index}")
        self.free: list[Reg] = [R9, R8, R7]
        self.vars: dict[str, tuple[int, Type]] = {}
        self.spans: list[tuple[int, int, A.Pos]] = []
        self.loops: list[_Loop] = []
        self.last_line = 0
        self.script = ctx.unit.script
        #: where the context is: r6 (kept from r1 by the first instruction),
        #: or r1 itself when every use comes before r1 is overwritten
        self.ctx_reg = R1 if ctx_in_r1 else R6

    # ---------------------------------------------------------- structure
    def build(self) -> Program:
        p = self.p
        self._comment_line(self.node.pos, f"{self.name}")
        if self.ctx_reg is R6:
            p.mov(R6, R1)
        if self.unit.exit_flag is not None and self.source is not None:
            p.ld_map_value(R0, self.unit.exit_flag)      # exit() has run: nothing more
            p.ldxdw(R0, R0, 0)
            p.jne(R0, 0, "out")
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

    def _comment_line(self, pos: A.Pos, extra: str | None = None) -> None:
        if pos.line == self.last_line and extra is None:
            return
        self.last_line = pos.line
        text = self.script.line(pos.line).strip()
        head = f"{self.script.filename}:{pos.line}: {text}"
        self.p.comment(head if extra is None else f"{extra} -- {head}")

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

    # ---------------------------------------------------------- registers
    def alloc(self) -> Reg | None:
        return self.free.pop() if self.free else None

    def release(self, r: Reg) -> None:
        if r in (R7, R8, R9) and r not in self.free:
            self.free.append(r)

    def _need(self, pos: A.Pos) -> Reg:
        r = self.alloc()
        if r is None:
            raise CodegenError("expression too deep for the registers", pos)
        return r

    # ---------------------------------------------------------- statements
    def block(self, b: A.Block) -> bool:
        """Emit the statements of ``b``; True when control cannot fall
        through its end (what follows a ``return`` or ``exit()`` is not
        emitted: the verifier refuses unreachable instructions)."""
        for s in b.stmts:
            if self.stmt(s):
                return True
        return False

    def stmt(self, s: A.Stmt) -> bool:
        """Emit ``s``; True when control does not go on after it."""
        start = len(self.p.insns)
        ends = False
        self._comment_line(s.pos)
        if isinstance(s, A.ExprStmt):
            self.expr_stmt(s.expr)
        elif isinstance(s, A.AssignVar):
            self.assign_var(s)
        elif isinstance(s, A.AssignMap):
            self.assign_map(s)
        elif isinstance(s, A.If):
            ends = self.if_(s)
        elif isinstance(s, A.Unroll):
            n = _const(s.count)
            if n is None or not 1 <= n <= 100:
                raise CodegenError("unroll needs a constant count between 1 and 100", s.count.pos)
            for _ in range(n):
                if self.block(s.body):
                    ends = True
                    break
        elif isinstance(s, A.While):
            self.while_(s)
        elif isinstance(s, A.Jump):
            self.jump(s)
            ends = True
        else:
            raise CodegenError(f"statement {type(s).__name__} is not supported", s.pos)
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.name == "exit":
            ends = True
        self.spans.append((start, len(self.p.insns), s.pos))
        return ends

    def jump(self, s: A.Jump) -> None:
        if s.kind == "return":
            self.p.ja("out")
        elif not self.loops:
            raise CodegenError(f"{s.kind} outside a loop", s.pos)
        elif s.kind == "break":
            self.p.ja(self.loops[-1].end)
        else:
            self.p.ja(self.loops[-1].head)

    _NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}

    def jump_if_false(self, e: A.Expr, target: str) -> None:
        """Jump to ``target`` when ``e`` is false (0): comparisons become one
        conditional jump, ``&&``/``||``/``!`` short-circuit, without
        materializing a 0/1 value."""
        self._jump_when(e, target, False)

    def jump_if_true(self, e: A.Expr, target: str) -> None:
        """Jump to ``target`` when ``e`` is true (not 0)."""
        self._jump_when(e, target, True)

    def _jump_when(self, e: A.Expr, target: str, truth: bool) -> None:
        """Jump to ``target`` when ``e``'s truth is ``truth``."""
        p = self.p
        if isinstance(e, A.Unop) and e.op == "!" and not e.postfix:
            self._jump_when(e.operand, target, not truth)
            return
        if isinstance(e, A.Binop) and e.op in ("&&", "||"):
            if (e.op == "||") == truth:         # either side alone decides: test both
                self._jump_when(e.left, target, truth)
                self._jump_when(e.right, target, truth)
            else:                               # the left side can decide the other way
                skip = p.fresh_label("or_ok" if e.op == "||" else "and_no")
                self._jump_when(e.left, skip, not truth)
                self._jump_when(e.right, target, truth)
                p.label(skip)
            return
        if isinstance(e, A.Binop) and e.op in self._NEGATED and self._int_compare(e):
            self._compare_jump(e, e.op if truth else self._NEGATED[e.op], target)
            return
        r = self.int_expr(e)
        if truth:
            p.jne(r, 0, target)
        else:
            p.jeq(r, 0, target)
        self.release(r)

    def _int_compare(self, e: A.Binop) -> bool:
        return type_of(e.left).kind != "string" and type_of(e.right).kind != "string"

    def _compare_jump(self, e: A.Binop, op: str, target: str) -> None:
        """``if left <op> right goto target`` (signed when both sides are)."""
        p = self.p
        signed = type_of(e.left).signed and type_of(e.right).signed
        cond = self._CMP[op][1 if signed else 0]
        left, right, _ = self._operands(e)
        p.jump_if(cond, left, right, target)
        self.release(left)
        if not isinstance(right, int):
            self.release(right)

    def _operands(self, e: A.Binop) -> tuple[Reg, Reg | int, bool]:
        """Evaluate both sides of ``e``: ``(left, right, spilled)``. ``right``
        is an int when it is a 32-bit constant; ``spilled`` when no register
        was left for the right side: the left one then comes back in r0
        (kept on the stack meanwhile, its register released)."""
        p = self.p
        left = self.int_expr(e.left)
        c = _const(e.right)
        if c is not None and -(1 << 31) <= c < (1 << 31):
            return left, c, False
        if not self.free:
            spill = p.stack.alloc(8)
            p.stxdw(R10, spill, left)
            self.release(left)
            right = self.int_expr(e.right)
            p.ldxdw(R0, R10, spill)
            return R0, right, True
        return left, self.int_expr(e.right), False

    def if_(self, s: A.If) -> bool:
        p = self.p
        els, end = p.fresh_label("else"), p.fresh_label("endif")
        self.jump_if_false(s.cond, els)
        then_ends = self.block(s.then)
        if s.else_ is not None and not then_ends:
            p.ja(end)
        p.label(els)
        if s.else_ is None:
            return False
        else_ends = self.block(s.else_)
        p.label(end)
        return then_ends and else_ends

    def while_(self, s: A.While) -> None:
        p = self.p
        head, end = p.fresh_label("while"), p.fresh_label("wend")
        p.label(head)
        self.jump_if_false(s.cond, end)
        self.loops.append(_Loop(head, end))
        self.block(s.body)
        self.loops.pop()
        p.ja(head)
        p.label(end)

    def assign_var(self, s: A.AssignVar) -> None:
        off, t = self.vars[s.var.name]
        if s.op is None:
            self.value_into(s.value, off, t)
            return
        r = self.int_expr(A.Binop(s.pos, s.op, s.var, s.value, type=t))
        self.p.stxdw(R10, off, r)
        self.release(r)

    # ---------------------------------------------------------- maps
    def plan(self, m: A.Map) -> MapPlan:
        plan = self.unit.maps.get("@" + m.name)
        if plan is None:
            raise CodegenError(f"unknown map @{m.name}", m.pos)
        return plan

    def key(self, m: A.Map, plan: MapPlan, extra: int = 0) -> int:
        """Build ``m``'s key on the stack (``extra`` bytes more after it, for
        a histogram's bucket); return its offset. Only the padding the
        values do not cover is zeroed."""
        p = self.p
        off = p.stack.alloc(plan.key_size + extra)
        if plan.key is None:
            self._zero(off, plan.key_size)
            return off
        if len(m.keys) == 1:
            elems, offsets = [plan.key], [0]
            self.value_into(m.keys[0], off, plan.key)
        else:
            elems, offsets = list(plan.key.elems), tuple_layout(plan.key.elems)[0]
            for k, t, o in zip(m.keys, plan.key.elems, offsets):
                self.value_into(k, off + o, t)
        covered = bytearray(plan.key_size)
        for t, o in zip(elems, offsets):
            size = t.size if t.kind in ("string", "buffer") else size_align(t)[0]
            covered[o:o + size] = b"\1" * size
        pos = 0
        while pos < plan.key_size:
            if covered[pos]:
                pos += 1
                continue
            end = pos
            while end < plan.key_size and not covered[end]:
                end += 1
            self._zero(off + pos, end - pos)
            pos = end
        return off

    def assign_map(self, s: A.AssignMap) -> None:
        plan = self.plan(s.map)
        v = s.value
        if plan.kind != "plain":
            if not (isinstance(v, A.Call) and v.name == plan.kind):
                raise CodegenError(f"@{s.map.name} is a {plan.kind}() map", v.pos)
            self.aggregate(plan, s.map, v)
            return
        key = self.key(s.map, plan)
        vt = _stored_value_type(plan.value)
        val = self.p.stack.alloc(plan.value_size)
        if vt.kind != "int":
            self._zero(val, plan.value_size)
        if s.op is None:
            self.value_into(v, val, vt)
        else:
            r = self.int_expr(A.Binop(s.pos, s.op, s.map, v, type=vt))
            self.p.stxdw(R10, val, r)
            self.release(r)
        self.p.map_update(plan.spec, key, val, flags=0)

    def aggregate(self, plan: MapPlan, m: A.Map, call: A.Call) -> None:
        """``@m[k] = count()/sum(v)/hist(v)/lhist(v, ...)`` by a per-CPU add
        (the trace layer's map layout, so its readers sum the CPUs);
        min/max/avg/stats through :mod:`pyebpf.trace.aggregate`'s emitters."""
        p = self.p
        if plan.kind == "count":
            key = self.key(m, plan)
            self.percpu_add(plan.spec, key, 1)
            return
        if not call.args:
            raise CodegenError(f"{plan.kind}() needs a value", call.pos)
        if plan.kind in ("hist", "lhist") and plan.key is None:
            r = self.int_expr(call.args[0])       # (no key: a per-CPU array of buckets)
            self._bucket(plan, r)
            self.release(r)
            slot = p.stack.alloc(4, 4)
            p.stxw(R10, slot, R1)
            done = p.fresh_label("hist_done")
            p.map_lookup(plan.spec, slot, done)
            p.ldxdw(R1, R0, 0)
            p.add(R1, 1)
            p.stxdw(R0, 0, R1)
            p.label(done)
            return
        if plan.kind in ("hist", "lhist"):
            key = self.key(m, plan, extra=8)
            r = self.int_expr(call.args[0])
            self._bucket(plan, r)
            self.release(r)
            p.stxdw(R10, key + plan.key_size, R1)
            self.percpu_add(plan.spec, key, 1)
            return
        key = self.key(m, plan)
        r = self.int_expr(call.args[0])
        if plan.kind == "sum":
            self.percpu_add(plan.spec, key, r)
        else:
            plan.agg.emit(p, r, key=key)
        self.release(r)

    def _bucket(self, plan: MapPlan, value: Reg) -> None:
        """``r1 = the histogram bucket of value`` (r2, r3 clobbered)."""
        from ..trace.aggregate import emit_linear_bucket, emit_log2_bucket
        if plan.kind == "hist":
            emit_log2_bucket(self.p, R1, value, R2, R3)
        else:
            lo, hi, step = plan.agg.linear
            emit_linear_bucket(self.p, R1, value, lo, hi, step, tmp=R2)

    def percpu_add(self, map_: Any, key: int, amount: Reg | int) -> None:
        """This CPU's value under the key at ``r10 + key`` += ``amount`` (an
        immediate or a register of the pool, which survives the calls),
        inserted when absent."""
        p = self.p
        miss, done = p.fresh_label("add_miss"), p.fresh_label("add_done")
        p.map_lookup(map_, key, miss)
        p.ldxdw(R1, R0, 0)
        p.add(R1, amount)
        p.stxdw(R0, 0, R1)
        p.ja(done)
        p.label(miss)
        val = p.stack.alloc(8)
        p.store(R10, val, amount, 8)
        p.map_update(map_, key, val, flags=1)          # BPF_NOEXIST
        p.label(done)

    def map_read(self, m: A.Map, dst: Reg) -> None:
        """``dst = @m[k]`` (0 when absent) for an integer map."""
        plan = self.plan(m)
        p = self.p
        key = self.key(m, plan)
        if plan.kind not in ("plain", "count", "sum", "min", "max"):
            raise CodegenError(f"the value of a {plan.kind}() map cannot be read in a probe", m.pos)
        miss, done = p.fresh_label("miss"), p.fresh_label("got")
        p.map_lookup(plan.spec, key, miss)
        p.ldxdw(dst, R0, 0)
        p.ja(done)
        p.label(miss)
        p.mov(dst, 0)
        p.label(done)

    def map_incdec(self, e: A.Unop, dst: Reg) -> None:
        m = e.operand
        assert isinstance(m, A.Map)
        plan = self.plan(m)
        p = self.p
        self.map_read(m, dst)
        key = self.key(m, plan)
        val = p.stack.alloc(8)
        p.mov(R1, dst)
        p.add(R1, 1 if e.op == "++" else -1)
        p.stxdw(R10, val, R1)
        if not e.postfix:
            p.mov(dst, R1)
        p.map_update(plan.spec, key, val, flags=0)

    # ---------------------------------------------------------- calls as statements
    def expr_stmt(self, e: A.Expr) -> None:
        if isinstance(e, A.Call):
            self.call_stmt(e)
            return
        r = self.int_expr(e)
        self.release(r)

    def call_stmt(self, c: A.Call) -> None:
        p = self.p
        name = c.name
        if name == "printf":
            if not c.args or not isinstance(c.args[0], A.String):
                raise CodegenError("printf needs a format string", c.pos)
            action = self.unit.action("printf", c.pos, fmt=c.args[0].value,
                                      args=[self.arg_type(a) for a in c.args[1:]])
            action.strftime = {i: a.args[0].value for i, a in enumerate(c.args[1:])
                               if isinstance(a, A.Call) and a.name == "strftime" and a.args
                               and isinstance(a.args[0], A.String)}
            self.output(action, c.args[1:])
        elif name == "time":
            fmt = c.args[0].value if c.args and isinstance(c.args[0], A.String) else "%H:%M:%S\n"
            self.output(self.unit.action("time", c.pos, fmt=fmt), [])
        elif name == "exit":
            p.ld_map_value(R1, self.unit.exit_flag)
            p.stdw(R1, 0, 1)
            self.output(self.unit.action("exit", c.pos), [])
            p.ja("out")
        elif name in ("print", "clear", "zero"):
            if not c.args:
                raise CodegenError(f"{name}() needs an argument", c.pos)
            target = c.args[0]
            if isinstance(target, A.Map) and not target.keys:
                params = [_const(a) or 0 for a in c.args[1:3]]
                self.plan(target)
                self.output(self.unit.action(name, c.pos, map="@" + target.name,
                                             params=params), [])
            elif name == "print":
                self.output(self.unit.action("print_value", c.pos,
                                             args=[self.arg_type(target)]), [target])
            else:
                raise CodegenError(f"{name}() takes a map", target.pos)
        elif name == "delete":
            for target in c.args:
                if not isinstance(target, A.Map):
                    raise CodegenError("delete() takes a map element", target.pos)
                plan = self.plan(target)
                if plan.kind in ("hist", "lhist"):
                    raise CodegenError("delete() of a histogram element is not supported yet",
                                       target.pos)
                key = self.key(target, plan)
                p.ld_map(R1, plan.spec)
                p.stack_pointer(R2, key)
                p.call("map_delete_elem")
        elif name == "join":
            self.join(c)
        elif name == "signal":
            sig = _const(c.args[0]) if c.args else None
            if sig is None:
                raise CodegenError("signal() needs a constant signal number", c.pos)
            p.mov(R1, sig)
            p.call("send_signal")
        elif name in ("count", "sum", "min", "max", "avg", "stats", "hist", "lhist"):
            raise CodegenError(f"{name}() must be assigned to a map", c.pos)
        else:
            r = self.int_expr(c)
            self.release(r)

    def join(self, c: A.Call) -> None:
        """``join(argv[, delim])``: up to :data:`JOIN_ARGS` strings of
        :data:`JOIN_STRLEN` bytes from a NULL-terminated array of pointers,
        built in a per-CPU scratch map (too big for the stack) and sent
        from there; user space joins them."""
        p = self.p
        if not c.args:
            raise CodegenError("join() needs an array of strings", c.pos)
        delim = c.args[1].value if len(c.args) > 1 and isinstance(c.args[1], A.String) else " "
        action = self.unit.action("join", c.pos, fmt=delim,
                                  args=[string_type(JOIN_STRLEN)] * JOIN_ARGS)
        scratch = self.unit.join_scratch()
        argv = self.int_expr(c.args[0])
        buf = self._need(c.pos)
        key = p.stack.alloc(4, 4)
        p.stw(R10, key, 0)
        done = p.fresh_label("join_done")
        p.map_lookup(scratch, key, done, dst=buf)
        p.stdw(buf, 0, action.id)
        for i in range(JOIN_ARGS):
            p.stb(buf, 8 + i * JOIN_STRLEN, 0)
        slot = p.stack.alloc(8)
        send = p.fresh_label("join_send")
        user = "probe_read_user" if self._user_space() or self.kind == "probe" and \
            getattr(self.source, "category", "") == "syscalls" else "probe_read_kernel"
        for i in range(JOIN_ARGS):
            p.stack_pointer(R1, slot)
            p.mov(R2, 8)
            p.mov(R3, argv)
            p.add(R3, 8 * i)
            p.call(user)
            p.ldxdw(R3, R10, slot)
            p.jeq(R3, 0, send)
            p.mov(R1, buf)
            p.add(R1, 8 + i * JOIN_STRLEN)
            p.mov(R2, JOIN_STRLEN)
            p.call(user + "_str")
        p.label(send)
        p.ld_map(R1, self.unit.ringbuf)
        p.mov(R2, buf)
        p.mov(R3, 8 + JOIN_ARGS * JOIN_STRLEN)
        p.mov(R4, 0)
        p.call("ringbuf_output")
        p.label(done)
        self.release(buf)
        self.release(argv)

    def arg_type(self, e: A.Expr) -> Type:
        """How an event carries ``e``: integers as 8 bytes."""
        t = type_of(e)
        if t.kind == "int":
            return int_type(8, t.signed)
        return t

    def output(self, action: Action, args: Sequence[A.Expr]) -> None:
        """Send an event: the action id, then ``args`` laid out as the action's record."""
        p = self.p
        offsets: list[int] = []
        size = 8
        if action.record is not None:
            offsets, rsize, _ = tuple_layout(action.record.elems)
            size = 8 + (rsize + 7) // 8 * 8
        if size > 480:
            raise CodegenError(f"the arguments of this {action.kind} need {size - 8} bytes; "
                               "an event holds at most 472 (use shorter strings)", action.pos)
        base = p.stack.alloc(size)
        if action.record is not None:
            self._zero(base + 8, size - 8)
            for e, t, o in zip(args, action.args, offsets):
                self.value_into(e, base + 8 + o, t)
        p.stdw(R10, base, action.id)
        p.ringbuf_output(self.unit.ringbuf, base, size, drops=self.unit.drops)

    # ---------------------------------------------------------- values into memory
    def value_into(self, e: A.Expr, off: int, t: Type) -> None:
        """Store ``e`` at ``r10 + off`` laid out as ``t``."""
        if t.kind in ("string", "buffer"):
            self.string_into(e, off, t.size)
        elif t.kind == "tuple":
            self.tuple_into(e, off, t)
        else:
            size, _ = size_align(t)
            r = self.int_expr(e)
            self.p.store(R10, off, r, size)
            self.release(r)

    def tuple_into(self, e: A.Expr, off: int, t: Type) -> None:
        offsets, size, _ = tuple_layout(t.elems)
        if isinstance(e, A.Tuple):
            for x, et, o in zip(e.elems, t.elems, offsets):
                self.value_into(x, off + o, et)
            return
        src = self.bytes_source(e, size)
        self.copy_stack(off, src, size, size)

    def copy_stack(self, dst: int, src: int, n: int, dst_size: int) -> None:
        """Copy ``min(n, dst_size)`` bytes of stack, zero the rest of ``dst``."""
        self.copy_bytes(R10, src, dst, min(n, dst_size))
        if dst_size > n:
            self._zero(dst + n, dst_size - n)

    def copy_bytes(self, base: Reg, src: int, dst: int, n: int) -> None:
        """Copy ``n`` bytes from ``base + src`` to ``r10 + dst``, in the
        widest accesses both alignments allow (the verifier refuses
        misaligned stack accesses)."""
        p = self.p
        pos = 0
        while pos < n:
            w = _width(src + pos, dst + pos, n - pos)
            p.load(R1, base, src + pos, w)
            p.store(R10, dst + pos, R1, w)
            pos += w

    def _zero(self, off: int, n: int) -> None:
        pos = 0
        while pos < n:
            w = _width(0, off + pos, n - pos)
            self.p.store(R10, off + pos, 0, w)
            pos += w

    def bytes_source(self, e: A.Expr, size: int) -> int:
        """The stack offset where the bytes of ``e`` (a string or tuple
        variable) are; other expressions are built into a new slot."""
        if isinstance(e, A.Variable) and e.name in self.vars:
            return self.vars[e.name][0]
        off = self.p.stack.alloc((size + 7) // 8 * 8)
        self.value_into(e, off, type_of(e))
        return off

    def string_into(self, e: A.Expr, off: int, size: int) -> None:
        p = self.p
        if isinstance(e, A.String):
            data = e.value.encode()[:size - 1] + b"\0"
            pos = 0
            while pos < len(data):               # the bytes, in aligned 1/2/4-byte stores
                w = min(_width(0, off + pos, len(data) - pos), 4)
                p.store(R10, off + pos, int.from_bytes(data[pos:pos + w], "little",
                                                        signed=True), w)
                pos += w
            self._zero(off + len(data), size - len(data))
            return
        if isinstance(e, A.Builtin) and e.name == "comm":
            self._zero(off, size)
            p.stack_pointer(R1, off)
            p.mov(R2, min(16, size))
            p.call("get_current_comm")
            return
        if isinstance(e, A.Variable) and e.name in self.vars:
            voff, vt = self.vars[e.name]
            self.copy_stack(off, voff, stored_size(vt) if vt.kind != "string" else vt.size, size)
            return
        if isinstance(e, A.Ternary):
            els, end = p.fresh_label("selse"), p.fresh_label("send")
            self.jump_if_false(e.cond, els)
            self.string_into(e.then, off, size)
            p.ja(end)
            p.label(els)
            self.string_into(e.else_, off, size)
            p.label(end)
            return
        if isinstance(e, A.FieldAccess) and self._is_args(e.expr):
            src = self._need_source(e, "emit_field_string")
            src.emit_field_string(p, e.field, off, size, self.ctx_reg)
            return
        if isinstance(e, A.Map):
            plan = self.plan(e)
            key = self.key(e, plan)
            self._zero(off, size)
            miss = p.fresh_label("smiss")
            p.map_lookup(plan.spec, key, miss)
            self.copy_bytes(R0, 0, off, min(size, plan.value_size))
            p.label(miss)
            return
        if isinstance(e, A.Call) and e.name == "str":
            self.str_call(e, off, size)
            return
        if isinstance(e, A.Call) and e.name == "buf" and e.args:
            n = _const(e.args[1]) if len(e.args) > 1 else None
            if n is None and len(e.args) > 1:
                raise CodegenError("buf() needs a constant length", e.args[1].pos)
            self._zero(off, size)
            r = self.int_expr(e.args[0])
            p.mov(R3, r)
            self.release(r)
            p.stack_pointer(R1, off)
            p.mov(R2, min(n if n is not None else size, size))
            p.call("probe_read_user")
            return
        raise CodegenError(f"cannot make a string of {type(e).__name__}", e.pos)

    def str_call(self, e: A.Call, off: int, size: int) -> None:
        p = self.p
        if not e.args:
            raise CodegenError("str() needs an argument", e.pos)
        src = e.args[0]
        if isinstance(src, A.FieldAccess) and self._is_args(src.expr) and \
                getattr(self.source, "emit_field_string", None) is not None and len(e.args) == 1:
            self.source.emit_field_string(p, src.field, off, size, self.ctx_reg)
            return
        self._zero(off, size)
        r = self.int_expr(src)
        if len(e.args) > 1:
            n = _const(e.args[1])
            if n is not None:
                p.mov(R2, max(1, min(n + 1, size)))
            else:
                rn = self.int_expr(e.args[1])
                small = p.fresh_label("strlen_ok")
                p.mov(R2, rn)
                p.add(R2, 1)
                p.jle(R2, size, small)
                p.mov(R2, size)
                p.label(small)
                self.release(rn)
        else:
            p.mov(R2, size)
        p.mov(R3, r)
        self.release(r)
        p.stack_pointer(R1, off)
        p.call("probe_read_user_str")

    # ---------------------------------------------------------- integers
    def _is_args(self, e: A.Expr) -> bool:
        return isinstance(e, A.Builtin) and e.name == "args"

    def _need_source(self, e: A.Expr, method: str) -> Any:
        fn = getattr(self.source, method, None) if self.source is not None else None
        if fn is None:
            what = self.kind if self.source is None else self.name
            raise CodegenError(f"{_describe(e)} is not available in {what}", e.pos)
        return self.source

    def int_expr(self, e: A.Expr) -> Reg:
        """Evaluate ``e`` into a register of the pool (release it after use)."""
        p = self.p
        c = _const(e)
        if c is not None:
            r = self._need(e.pos)
            self._load_const(r, c)
            return r
        if isinstance(e, A.Binop):
            return self.binop(e)
        if isinstance(e, A.Unop):
            return self.unop(e)
        if isinstance(e, A.Ternary):
            els, end = p.fresh_label("telse"), p.fresh_label("tend")
            self.jump_if_false(e.cond, els)
            a = self.int_expr(e.then)
            p.mov(R0, a)
            self.release(a)
            p.ja(end)
            p.label(els)
            b = self.int_expr(e.else_)
            p.mov(R0, b)
            self.release(b)
            p.label(end)
            r = self._need(e.pos)
            p.mov(r, R0)
            return r
        if isinstance(e, A.Cast):
            r = self.int_expr(e.expr)
            t = type_of(e)
            if t.kind == "int" and t.size < 8:
                self._narrow(r, t.size, t.signed)
            return r
        if isinstance(e, A.PositionalParameter):
            r = self._need(e.pos)
            if e.count:
                self._load_const(r, len(self.ctx.params))
            else:
                text = self.ctx.params[e.index - 1] if e.index <= len(self.ctx.params) else "0"
                try:
                    self._load_const(r, int(text, 0))
                except ValueError:
                    raise CodegenError(f"${e.index} is {text!r}, not an integer", e.pos) from None
            return r
        r = self._need(e.pos)
        if isinstance(e, A.Builtin):
            self.builtin(e, r)
        elif isinstance(e, A.Variable):
            if e.name not in self.vars:
                raise CodegenError(f"${e.name} is used before it is assigned", e.pos)
            off, t = self.vars[e.name]
            p.ldxdw(r, R10, off)
        elif isinstance(e, A.Map):
            self.map_read(e, r)
        elif isinstance(e, A.FieldAccess) and self._is_args(e.expr):
            self._need_source(e, "emit_field").emit_field(p, r, e.field, self.ctx_reg)
        elif isinstance(e, A.Call):
            self.int_call(e, r)
        else:
            raise CodegenError(f"{_describe(e)} has no integer value here", e.pos)
        return r

    def _load_const(self, r: Reg, v: int) -> None:
        v = _wrap64(v)
        if -(1 << 31) <= v < (1 << 31):
            self.p.mov(r, v)
        else:
            self.p.lddw(r, v & ((1 << 64) - 1))

    def _narrow(self, r: Reg, size: int, signed: bool) -> None:
        if signed:
            self.p.movsx(r, r, size * 8)
        elif size == 4:
            self.p.mov(r.w, r.w)
        else:
            self.p.and_(r, (1 << (size * 8)) - 1)

    def builtin(self, e: A.Builtin, r: Reg) -> None:
        p = self.p
        n = e.name
        if n in HELPER_BUILTINS:
            emit_helper_builtin(p, n, r)
        elif n == "elapsed":
            emit_elapsed(p, r, self.ctx.start_ns)
        elif n == "cpid":
            self._load_const(r, self.ctx.cpid)
        elif n == "func" and self.source is not None and not self.unit_prog_is_raw():
            # bpftrace 0.17 reads the instruction pointer: the function's
            # address in a uprobe, the return address in a uretprobe
            from .. import ptregs
            ptregs.load_reg(p, r, "rip", ctx=self.ctx_reg)
        elif n in ("probe", "func"):
            p.mov(r, self.index)
        elif n == "retval":
            self._need_source(e, "emit_retval").emit_retval(p, r, self.ctx_reg)
        elif n.startswith("arg") and n[3:].isdigit():
            if self.source is None:
                raise CodegenError(f"{n} is not available in {self.kind}", e.pos)
            self.source.emit_arg(p, r, int(n[3:]), self.ctx_reg)
        elif n == "ustack":                      # pid << 32 | stack id
            emit_ustack_key(p, r, self.ctx_reg, self.unit.stacks("ustack"))
        elif n == "kstack":
            p.mov(R1, self.ctx_reg)
            p.ld_map(R2, self.unit.stacks("kstack"))
            p.mov(R3, 0)
            p.call("get_stackid")
            p.mov(W0, W0)
            p.mov(r, R0)
        else:
            raise CodegenError(f"builtin {n} is not supported yet", e.pos)

    def _user_space(self) -> bool:
        """True at a uprobe/uretprobe/USDT probe (its pointers are user memory)."""
        name = type(self.source).__name__.lower() if self.source is not None else ""
        return "uprobe" in name or "usdt" in name

    def _user_address(self, name: A.String, pos: A.Pos) -> int:
        """``uaddr("sym")``: the ELF address of a data symbol of the probed
        binary -- not relocated, as bpftrace 0.17 gives it (so in a PIE it is
        the file's address, not the process's)."""
        path = getattr(self.source, "path", None)
        if not path:
            raise CodegenError("uaddr can only be used with uprobes and usdt probes", pos)
        from ..elf import STT_OBJECT, open_elf
        try:
            syms = [s for s in open_elf(path).find_symbols(name.value) if s.type == STT_OBJECT]
        except Exception:
            syms = []
        if not syms:
            raise CodegenError(f"Could not resolve symbol: {path}:{name.value}", pos)
        return int(syms[0].address)

    def unit_prog_is_raw(self) -> bool:
        """True when the context is not a ``pt_regs`` (tracepoints, perf events)."""
        from ..kernel.constants import ProgType
        return int(self.source.prog_type) != int(ProgType.KPROBE)

    def int_call(self, e: A.Call, r: Reg) -> None:
        p = self.p
        if e.name == "strncmp":
            a, b, n = e.args
            size = _const(n)
            if size is None:
                raise CodegenError("strncmp needs a constant length", n.pos)
            self.str_compare(a, b, r, size, negate=True, prefix=True)
        elif e.name in ("ustack", "kstack"):
            self.builtin(A.Builtin(e.pos, e.name, type=e.type), r)
        elif e.name == "reg" and e.args and isinstance(e.args[0], A.String):
            if self.source is None or self.unit_prog_is_raw():
                raise CodegenError("reg() needs a probe with registers (uprobe, usdt)", e.pos)
            from .. import ptregs
            name = e.args[0].value
            try:
                ptregs.load_reg(p, r, _BPFTRACE_REGS.get(name, name), ctx=self.ctx_reg)
            except Exception as exc:
                raise CodegenError(f"reg(): {exc}", e.args[0].pos) from None
        elif e.name == "ntop" and len(e.args) == 1:       # an IPv4 address as an integer
            x = self.int_expr(e.args[0])
            p.mov(r, x)
            p.mov(r.w, r.w)
            self.release(x)
        elif e.name == "strftime" and len(e.args) == 2:
            x = self.int_expr(e.args[1])
            p.mov(r, x)
            self.release(x)
        elif e.name == "kaddr" and e.args and isinstance(e.args[0], A.String):
            from .stacks import kernel_address
            addr = kernel_address(e.args[0].value)
            if addr is None:
                raise CodegenError(f"kaddr: no kernel symbol {e.args[0].value!r}", e.args[0].pos)
            self._load_const(r, addr)
        elif e.name == "uaddr" and e.args and isinstance(e.args[0], A.String):
            self._load_const(r, self._user_address(e.args[0], e.pos))
        elif e.name in ("usym", "uaddr", "ksym", "kaddr") and e.args:
            x = self.int_expr(e.args[0])
            p.mov(r, x)
            self.release(x)
        else:
            raise CodegenError(f"{e.name}() has no integer value", e.pos)

    def binop(self, e: A.Binop) -> Reg:
        p = self.p
        op = e.op
        lt, rt = type_of(e.left), type_of(e.right)
        if op in ("==", "!=") and (lt.kind == "string" or rt.kind == "string"):
            r = self._need(e.pos)
            size = max(size_align(lt)[0], size_align(rt)[0])
            self.str_compare(e.left, e.right, r, size, negate=op == "!=")
            return r
        if op in ("&&", "||"):
            r = self.int_expr(e.left)
            short, end = p.fresh_label("sc"), p.fresh_label("scend")
            p.jeq(r, 0, short) if op == "&&" else p.jne(r, 0, short)
            self.release(r)
            r2 = self.int_expr(e.right)
            p.mov(R0, 0)
            p.jeq(r2, 0, end)
            p.mov(R0, 1)
            p.ja(end)
            p.label(short)
            p.mov(R0, 0 if op == "&&" else 1)
            p.label(end)
            p.mov(r2, R0)
            return r2
        signed = lt.signed and rt.signed
        left, right, spilled = self._operands(e)
        self._apply(op, left, right, signed, e.pos)
        if isinstance(right, int):
            return left
        if spilled:                     # the result goes where the right side is
            p.mov(right, R0)
            return right
        self.release(right)
        return left

    _ALU = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "&": "and_",
            "|": "or_", "^": "xor", "<<": "lsh"}
    _CMP = {"==": ("jeq", "jeq"), "!=": ("jne", "jne"), "<": ("jlt", "jslt"),
            "<=": ("jle", "jsle"), ">": ("jgt", "jsgt"), ">=": ("jge", "jsge")}

    def _apply(self, op: str, dst: Reg, src: Reg | int, signed: bool, pos: A.Pos) -> None:
        p = self.p
        if isinstance(src, int) and src > 0 and src & (src - 1) == 0 and op in ("%", "/", "*"):
            shift = src.bit_length() - 1        # (BPF's / and % are unsigned, as bpftrace's)
            if op == "%":
                p.and_(dst, src - 1)
            elif op == "/":
                if shift:
                    p.rsh(dst, shift)
            elif shift:
                p.lsh(dst, shift)
            return
        if op in self._ALU:
            getattr(p, self._ALU[op])(dst, src)
        elif op == ">>":
            (p.arsh if signed else p.rsh)(dst, src)
        elif op in self._CMP:
            yes, end = p.fresh_label("t"), p.fresh_label("c")
            p.jump_if(self._CMP[op][1 if signed else 0], dst, src, yes)
            p.mov(dst, 0)
            p.ja(end)
            p.label(yes)
            p.mov(dst, 1)
            p.label(end)
        else:
            raise CodegenError(f"operator {op} is not supported", pos)

    def unop(self, e: A.Unop) -> Reg:
        p = self.p
        if e.op in ("++", "--"):
            target = e.operand
            r = self._need(e.pos)
            if isinstance(target, A.Map):
                self.map_incdec(e, r)
                return r
            if isinstance(target, A.Variable) and target.name in self.vars:
                off, _ = self.vars[target.name]
                p.ldxdw(r, R10, off)
                p.mov(R1, r)
                p.add(R1, 1 if e.op == "++" else -1)
                p.stxdw(R10, off, R1)
                if not e.postfix:
                    p.mov(r, R1)
                return r
            raise CodegenError(f"{e.op} needs a variable or a map", e.pos)
        r = self.int_expr(e.operand)
        if e.op == "-":
            p.neg(r)
        elif e.op == "~":
            p.xor(r, -1)
        elif e.op == "!":
            yes, end = p.fresh_label("not"), p.fresh_label("notend")
            p.jeq(r, 0, yes)
            p.mov(r, 0)
            p.ja(end)
            p.label(yes)
            p.mov(r, 1)
            p.label(end)
        elif e.op == "*":                 # user memory at a uprobe/USDT, else kernel memory
            p.mov(R3, r)
            slot = p.stack.alloc(8)
            p.stack_pointer(R1, slot)
            p.mov(R2, 8)
            p.call("probe_read_user" if self._user_space() else "probe_read_kernel")
            p.ldxdw(r, R10, slot)
        else:
            raise CodegenError(f"operator {e.op} is not supported", e.pos)
        return r

    def str_compare(self, a: A.Expr, b: A.Expr, dst: Reg, size: int, negate: bool,
                    prefix: bool = False) -> None:
        """``dst = (a == b)`` on strings, up to ``size`` bytes (``negate``:
        !=; ``prefix``: equal when the first ``size`` bytes are, strncmp)."""
        p = self.p
        if isinstance(a, A.String) and not isinstance(b, A.String):
            a, b = b, a
        ta = type_of(a)
        sa = ta.size if ta.kind == "string" else size
        aoff = self.string_source(a, sa)
        diff, end = p.fresh_label("sdiff"), p.fresh_label("send")
        same_value, diff_value = (0, 1) if negate else (1, 0)
        if isinstance(b, A.String):
            lit = b.value.encode() + b"\0"
            for i, ch in enumerate(lit[:min(size, sa)]):
                p.ldxb(R1, R10, aoff + i)
                p.jne(R1, ch, diff)
            if prefix or len(lit) <= min(size, sa):   # (else ``a`` cannot hold it)
                p.mov(dst, same_value)
                p.ja(end)
        else:
            tb = type_of(b)
            sb = tb.size if tb.kind == "string" else size
            boff = self.string_source(b, sb)
            same = p.fresh_label("ssame")
            for i in range(min(size, sa, sb)):
                p.ldxb(R1, R10, aoff + i)
                p.ldxb(R2, R10, boff + i)
                p.jne(R1, R2, diff)
                p.jeq(R1, 0, same)
            p.label(same)
            p.mov(dst, same_value)
            p.ja(end)
        p.label(diff)
        p.mov(dst, diff_value)
        p.label(end)

    def string_source(self, e: A.Expr, size: int) -> int:
        if isinstance(e, A.Variable) and e.name in self.vars:
            return self.vars[e.name][0]
        off = self.p.stack.alloc((size + 7) // 8 * 8)
        self.string_into(e, off, size)
        return off


def _width(a: int, b: int, left: int) -> int:
    """The widest access (8, 4, 2, 1) aligned at offsets ``a`` and ``b``
    that fits in ``left`` bytes."""
    for w in (8, 4, 2, 1):
        if w <= left and a % w == 0 and b % w == 0:
            return w
    return 1


def _describe(e: A.Expr) -> str:
    if isinstance(e, A.Builtin):
        return e.name
    if isinstance(e, A.FieldAccess):
        return f"{_describe(e.expr)}.{e.field}"
    if isinstance(e, A.Call):
        return f"{e.name}()"
    return type(e).__name__.lower()



