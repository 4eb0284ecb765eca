"""Semantic analysis of a bpftrace program: types, maps, scratch variables.

:func:`analyse` walks a parsed :class:`~pyebpf.lang.ast.Script` the way
bpftrace 0.17's semantic analyser does, and

- sets ``type`` (a :class:`~pyebpf.lang.types.Type`) on every expression;
- fixes each map's key and value types (the first assignment decides, as in
  bpftrace; later uses must agree: integers of any size/sign, strings of any
  length), and returns them as :class:`MapInfo`;
- gives every probe its scratch variables (the whole probe body is one scope
  in bpftrace 0.17; a variable is used only after it is assigned);
- checks what bpftrace checks, with bpftrace's messages and positions:
  unknown functions and builtins, argument counts and kinds, aggregations
  only as map values, ``printf`` formats, ``unroll`` counts, builtins only in
  the probes that have them (``args``, ``retval``, ``argN``, ``func``).

Integer rules (bpftrace's): literals are ``int64``; builtins are ``uint64``
(``cpid`` ``uint32``); a binary operation is 64-bit, signed when both sides
are (a shift: when its left side is); comparisons and logical operations
too. Casts truncate or extend to the named type. A map key integer is
stored in 64 bits with its signedness. Argument and ``retval`` types come
from a :class:`TypeResolver` (the probes' layer), ``uint64`` without one.
What bpftrace's code does with them: each operand is extended to 64 bits
by its own sign; ``< <= > >=`` compare signed only when both operands are
signed; ``/`` and ``%`` are unsigned and ``>>`` logical whatever the signs.
A tuple value is laid out with C's padding, the keys of a map with several
keys one after the other (:func:`~pyebpf.lang.types.tuple_type`).

Errors are collected for the whole script and raised as one
:class:`~pyebpf.lang.errors.LangError`.
"""
from __future__ import annotations

from . import ast
from .errors import Diagnostic, LangError
from .types import INT_NAMES, NONE, Type, int_type, string_type, tuple_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, Sequence

    class TypeResolver(Protocol):
        """What the semantic pass asks the probes' layer about an attach point."""

        def arg_type(self, ap: ast.AttachPoint, n: int) -> Type:
            """The type of ``argN`` (int64 by default; USDT: the spec's)."""

        def args_record(self, ap: ast.AttachPoint) -> Type | None:
            """A tracepoint's ``args``: a ``record`` Type, or None."""

        def retval_type(self, ap: ast.AttachPoint) -> Type:
            """The type of ``retval``."""
else:
    TypeResolver = object

__all__ = ["analyse", "Analysis", "MapInfo", "TypeResolver", "STRLEN", "signal_number", "param_int",
           "printf_specs", "printf_check"]

#: bpftrace's default string size (BPFTRACE_STRLEN), its NUL included
STRLEN = 64
COMM_SIZE = 16
#: bpftrace's number of semantic passes (the last one checks everything)
_PASSES = 10
U64 = int_type(8, False)
I64 = int_type(8, True)
U32 = int_type(4, False)
#: a user symbol: its address and the process's id (bpftrace's 16 bytes)
USYM = Type("usym", 16)

#: how bpftrace names a kind in messages ("integer provided")
_KIND_NAMES = {"int": "integer", "pointer": "pointer", "record": "record"}
_AGG_FUNCS = frozenset({"count", "sum", "min", "max", "avg", "stats", "hist", "lhist"})
_KNOWN_FUNCS = frozenset(
    "avg buf cat cgroupid clear count delete exit hist join kaddr ksym lhist max min ntop "
    "print printf cgroup_path reg signal sizeof stats str strftime strncmp sum system time "
    "uaddr usym zero kstack ustack".split())
#: the signals bpftrace 0.17 knows by name (x86_64 numbers)
_SIGNALS = {"SIGABRT": 6, "SIGALRM": 14, "SIGBUS": 7, "SIGCHLD": 17, "SIGCONT": 18,
            "SIGFPE": 8, "SIGHUP": 1, "SIGILL": 4, "SIGINT": 2, "SIGKILL": 9, "SIGPIPE": 13,
            "SIGPOLL": 29, "SIGQUIT": 3, "SIGSEGV": 11, "SIGSTOP": 19, "SIGSYS": 31,
            "SIGTERM": 15, "SIGTRAP": 5, "SIGTSTP": 20, "SIGTTIN": 21, "SIGTTOU": 22,
            "SIGURG": 23, "SIGUSR1": 10, "SIGUSR2": 12, "SIGVTALRM": 26, "SIGWINCH": 28,
            "SIGXCPU": 24, "SIGXFSZ": 25}
_X86_REGS = frozenset("r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs "
                      "flags sp ss".split())
#: functions bpftrace allows only in some probes
_ONLY_IN = {
    "reg": frozenset({"kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "profile",
                      "interval", "software", "hardware", "watchpoint", "asyncwatchpoint"}),
    "uaddr": frozenset({"uprobe", "uretprobe", "usdt"}),
    "signal": frozenset({"kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "tracepoint",
                         "profile", "kfunc", "kretfunc", "rawtracepoint"}),
}


class MapInfo:
    """A map's layout: ``name`` (``"@x"``, ``"@"``), ``key`` (None without
    keys; a ``tuple`` Type when it has several) and ``value``."""

    __slots__ = ("name", "key", "value")

    def __init__(self, name: str, key: Type | None, value: Type) -> None:
        self.name = name
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return f"MapInfo({self.name!r}, key={self.key}, value={self.value})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MapInfo) and (self.name, self.key, self.value) == (
            other.name, other.key, other.value)


class Analysis:
    """What :func:`analyse` found: ``maps`` (name -> :class:`MapInfo`, in
    order of first use), ``variables`` (probe -> ``$name`` -> Type, the
    ``$`` left out of the names), ``params`` (the positional parameters)."""

    __slots__ = ("maps", "variables", "params")

    def __init__(self, maps: dict[str, MapInfo], variables: dict[ast.Probe, dict[str, Type]],
                 params: tuple[str, ...]) -> None:
        self.maps = maps
        self.variables = variables
        self.params = params


def param_int(text: str) -> int | None:
    """A positional parameter's value as a number (bpftrace's reading:
    decimal, ``0x`` hex, ``0`` octal, a sign; empty is 0), None when it is
    not one."""
    body = text.strip()
    if not body:
        return 0
    sign = -1 if body[0] == "-" else 1
    digits = body.lstrip("+-")
    try:
        if digits[:2].lower() == "0x":
            return sign * int(digits[2:], 16)
        if len(digits) > 1 and digits[0] == "0":
            return sign * int(digits[1:], 8)
        return sign * int(digits, 10)
    except ValueError:
        return None


def signal_number(name: str) -> int | None:
    """The number of a signal named as ``signal()`` takes it (bpftrace's
    rule: any case, ``SIG`` optional: ``"KILL"``, ``"sigusr1"``), or None."""
    sig = name.upper()
    if sig and sig[0] != "S":
        sig = "SIG" + sig
    return _SIGNALS.get(sig)


def _kind_name(t: Type | None) -> str:
    if t is None:
        return "none"
    return _KIND_NAMES.get(t.kind, t.kind)


def _tstr(t: Type) -> str:
    """A type as bpftrace prints it in messages (``unsigned int64``)."""
    if t.kind == "int":
        return f"{'' if t.signed else 'unsigned '}int{t.size * 8}"
    if t.kind in ("string", "buffer"):
        return f"{t.kind}[{t.size}]"
    if t.kind == "tuple":
        return "(" + ",".join(_tstr(e) for e in t.elems) + ")"
    if t.kind == "pointer":
        return f"{_tstr(t.elem) if t.elem else 'void'} *"
    return t.kind


def _span(a: ast.Pos, b: ast.Pos) -> ast.Pos:
    """From ``a``'s start to ``b``'s end (bpftrace's ``loc + loc``)."""
    bline = b.end_line or b.line
    if bline == a.line:
        return ast.Pos(a.line, a.column, b.end or b.column + 1)
    return ast.Pos(a.line, a.column, a.column + 1, bline)


def _same_kind(a: Type, b: Type) -> bool:
    """Compatible for a map key/value or a variable: same kind; integers of
    any size and sign, strings and buffers of any length."""
    if a.kind != b.kind:
        return False
    if a.kind == "tuple":
        return len(a.elems) == len(b.elems) and all(
            _same_kind(x, y) for x, y in zip(a.elems, b.elems))
    return True


def _merge(a: Type, b: Type, packed: bool = False) -> Type:
    """The type holding both ``a`` and ``b`` (compatible): the longer
    string; ``packed`` for the keys of a map with several."""
    if a.kind in ("string", "buffer") and b.size > a.size:
        return b
    if a.kind == "tuple":
        return tuple_type([_merge(x, y) for x, y in zip(a.elems, b.elems)], packed=packed)
    return a


def _key_shape(keys: list[Type]) -> Type | None:
    if not keys:
        return None
    if len(keys) == 1:
        return keys[0]
    return tuple_type(keys, packed=True)


def _key_str(key: Type | None) -> str:
    """bpftrace's argument list of a key: integers shown unsigned."""
    if key is None:
        return "[]"
    keys = key.elems if key.kind == "tuple" else (key,)
    shown = [f"unsigned int{k.size * 8}" if k.kind == "int" else _tstr(k) for k in keys]
    return "[" + ", ".join(shown) + "]"


class _Probe:
    """Per-probe state: the probe and its scratch variables."""

    def __init__(self, probe: ast.Probe, variables: dict[str, Type]) -> None:
        self.probe = probe
        self.vars = variables     # kept from pass to pass, as bpftrace keeps them

    @property
    def providers(self) -> list[str]:
        return [ap.provider for ap in self.probe.attach_points]

    def single_provider(self) -> str:
        """The probes' provider when they all share one (bpftrace's
        ``single_provider_type``), else ``"invalid"``; BEGIN/END are
        ``"special"``."""
        kinds = {("special" if p in ("BEGIN", "END") else p) for p in self.providers}
        return kinds.pop() if len(kinds) == 1 else "invalid"


class Analyser:
    """One analysis of one script (:func:`analyse` is the entry point)."""

    def __init__(self, script: ast.Script, resolver: TypeResolver | None,
                 params: Sequence[str]) -> None:
        self.script = script
        self.resolver = resolver
        self.params = tuple(params)
        self.maps: dict[str, MapInfo] = {}
        self.variables: dict[ast.Probe, dict[str, Type]] = {}
        self.errors: list[Diagnostic] = []
        self.final = False
        self.loops = 0
        self.seen_special: set[str] = set()   # BEGIN/END met in this pass
        self.pass_n = 0
        # each map's key, fixed by its first use from the second pass on (bpftrace)
        self.keys: dict[str, Type | None] = {}
        self.calls: list[str] = []       # the calls whose arguments are being typed
        self.str_param = False           # a positional parameter inside str()
        self.p: _Probe | None = None

    # -- errors ------------------------------------------------------------
    def error(self, message: str, pos: ast.Pos, final: bool = False) -> None:
        """Record an error; ``final``: one bpftrace reports on its last pass
        only (type checks that need every map's type)."""
        if self.final or not final:
            self.errors.append(Diagnostic(message, pos, end_line=pos.end_line,
                                          filename=self.script.filename,
                                          source=self.script.source))

    # -- driver --------------------------------------------------------------
    def run(self) -> Analysis:
        """Passes as bpftrace makes them: the first ones learn the maps' types
        from every assignment (a map read in one probe may be assigned in a
        later one) until they no longer change, the last one also checks
        what needs every type; a pass with errors ends the analysis (they
        are raised)."""
        previous = None
        for n in range(1, _PASSES + 1):
            self.final = n == _PASSES
            self.pass_n = n
            self.walk()
            state = [(m.name, m.key, m.value) for m in self.maps.values()]
            if not self.final and state == previous:
                self.final = True       # settled: the last pass now
                self.pass_n += 1
                self.walk()
                break
            previous = state
        for name, info in self.maps.items():
            info.key = self.keys.get(name, info.key)
        return Analysis(self.maps, self.variables, self.params)

    def walk(self) -> None:
        """One pass over the script (raises the errors it found)."""
        self.seen_special.clear()
        for probe in self.script.probes:
            self.p = _Probe(probe, self.variables.setdefault(probe, {}))
            for ap in probe.attach_points:
                self.attach_point(ap)
            if probe.predicate is not None:
                t = self.expr(probe.predicate)
                if t.kind not in ("int", "pointer"):
                    self.error(f"Invalid type for predicate: {_kind_name(t)}",
                               probe.predicate_pos or probe.predicate.pos, final=True)
            self.block(probe.block)
        if self.errors:
            raise LangError.collected(self.errors)

    def attach_point(self, ap: ast.AttachPoint) -> None:
        """BEGIN and END once each (checked on the last pass, as bpftrace);
        the units and rates of timed probes."""
        if ap.provider in ("BEGIN", "END"):
            if self.final and ap.provider in self.seen_special:
                self.error(f"More than one {ap.provider} probe defined", ap.pos)
            self.seen_special.add(ap.provider)
        elif ap.provider in ("profile", "interval") and len(ap.parts) == 2:
            self.check_rate(ap)

    def check_rate(self, ap: ast.AttachPoint) -> None:
        """``profile:hz:99``, ``interval:s:1``: a unit bpftrace accepts and a
        positive integer."""
        unit, rate = ap.parts
        if unit not in ("hz", "s", "ms", "us"):
            self.error(f"{unit} is not an accepted unit of time", ap.pos)
        value = param_int(rate) if rate.strip() else None
        if value is None:
            self.error(f"{ap.provider} probe must have an integer frequency", ap.pos)
        elif value <= 0 and ap.provider == "profile":
            self.error("profile frequency should be a positive integer", ap.pos)

    # -- statements ------------------------------------------------------
    def block(self, block: ast.Block) -> None:
        """Check a block's statements in order."""
        for stmt in block.stmts:
            self.stmt(stmt)

    def stmt(self, s: ast.Stmt) -> None:
        """Check one statement."""
        # (duplicates: deliberate, codegen's stmt() dispatches on the same node kinds)
        if isinstance(s, ast.ExprStmt):
            self.expr(s.expr)
        elif isinstance(s, ast.AssignMap):
            self.assign_map(s)
        elif isinstance(s, ast.AssignVar):
            self.assign_var(s)
        elif isinstance(s, ast.If):
            self.expr(s.cond)
            # bpftrace 0.17 gives an if no position: it reports 1:1-1
            self.truthy(s.cond, "if()", ast.Pos(1, 1, 1))
            self.block(s.then)
            if s.else_ is not None:
                self.block(s.else_)
        elif isinstance(s, ast.Unroll):
            self.unroll(s)
        elif isinstance(s, ast.While):
            self.expr(s.cond)
            self.truthy(s.cond, "while()", s.pos)
            self.loops += 1
            self.block(s.body)
            self.loops -= 1
        elif isinstance(s, ast.Jump) and s.kind != "return" and not self.loops:
            self.error(f"{s.kind} used outside of a loop", s.pos)

    def truthy(self, e: ast.Expr, where: str, pos: ast.Pos) -> None:
        """A condition must be an integer (bpftrace checks it on its last pass)."""
        t = e.type
        if t is not None and t.kind != "int":
            self.error(f"Invalid condition in {where}: {_kind_name(t)}", pos, final=True)

    def unroll(self, s: ast.Unroll) -> None:
        """``unroll (N)``: N a constant between 1 and 100."""
        self.expr(s.count)
        n = self.const_int(s.count)
        if n is None:
            self.error("invalid unroll value", s.pos)
        elif n > 100:
            self.error("unroll maximum value is 100", s.pos)
        elif n < 1:
            self.error("unroll minimum value is 1", s.pos)
        self.block(s.body)

    def assign_map(self, s: ast.AssignMap) -> None:
        """``@m[k] = v`` / ``@m[k] op= v``: the first assignment fixes the
        map's value type (an integer stored in 64 bits), later ones must be
        of the same kind (strings and tuples grow to the longest); bpftrace's
        rules, for values without a type on early passes too."""
        m = s.map
        self.map_keys(m)
        self.check_key(m)
        if s.op is not None:
            value = self.compound(s)
        else:
            value = self.expr(s.value, assigned_to="map")
        name = "@" + m.name
        info = self.maps.get(name)
        if info is None:
            stored = int_type(8, value.signed) if value.kind == "int" else value
            self.maps[name] = MapInfo(name, self.key_of(m), stored)
        elif info.value.kind == "none":
            if self.final:
                self.error(f"Undefined map: {name}", m.pos)
            else:
                info.value = int_type(8, value.signed) if value.kind == "int" else value
        elif info.value.kind != value.kind:
            self.error(f"Type mismatch for {name}: trying to assign value of type "
                       f"'{_tstr(value)}' when map already contains a value of type "
                       f"'{_tstr(info.value)}", m.pos)
        elif value.kind in ("string", "tuple"):
            info.value = _merge(info.value, value)
        m.type = self.maps[name].value
        if value.kind == "none":
            self.error("Invalid expression for assignment: none", s.value.pos, final=True)

    def compound(self, s: ast.AssignMap | ast.AssignVar) -> Type:
        """``x op= v`` is ``x = x op v`` (bpftrace reads ``x`` as an
        expression, then types the operation): the operation's type."""
        target: ast.Map | ast.Variable = s.map if isinstance(s, ast.AssignMap) else s.var
        assert s.op is not None
        if isinstance(target, ast.Map):
            current = self.map_read(target)
        else:
            current = self.expr(target)
        value = self.expr(s.value)
        return self.binop_type(s.op, current, value, _span(target.pos, s.value.pos), s.pos)

    def assign_var(self, s: ast.AssignVar) -> None:
        """``$v = e`` / ``$v op= e``: the first assignment in the probe fixes the
        variable's type (bpftrace's rules, including for values that have no
        type yet on an early pass)."""
        v = s.var
        assert self.p is not None
        if s.op is not None:
            value = self.compound(s)
        else:
            value = self.expr(s.value, assigned_to="var")
        stored = self.p.vars.get(v.name)
        if stored is None:
            self.p.vars[v.name] = value
        elif stored.kind == "none":
            if self.final:
                self.error(f"Undefined variable: ${v.name}", s.pos)
            else:
                self.p.vars[v.name] = value
        elif stored.kind == value.kind and stored.kind in ("string", "tuple"):
            self.p.vars[v.name] = _merge(stored, value)
        elif not _same_kind(stored, value):
            self.error(f"Type mismatch for ${v.name}: trying to assign value of type "
                       f"'{_tstr(value)}' when variable already contains a value of type "
                       f"'{_tstr(stored)}'", s.pos)
        v.type = self.p.vars[v.name]
        if value.kind == "none":
            self.error("Invalid expression for assignment: none", s.value.pos, final=True)

    # -- maps --------------------------------------------------------------
    def map_keys(self, m: ast.Map) -> None:
        """Type a map's key expressions."""
        for k in m.keys:
            t = self.expr(k, assigned_to="key")
            if t.kind == "int" and t.size < 8:
                # bpftrace wraps a narrow key in a cast to 64 bits and types
                # it again (its errors are reported twice)
                self.expr(k, assigned_to="key")
            if t.kind == "tuple":
                self.error("tuple cannot be used as a map key. Try a multi-key associative"
                           " array instead (eg `@map[$1, $2] = ...)`.", m.pos)

    def key_of(self, m: ast.Map) -> Type | None:
        """The key type of a use of ``m`` (integers widened to 64 bits, their
        sign kept; several keys make a tuple)."""
        keys = []
        for k in m.keys:
            t = k.type or NONE
            if t.kind == "int" and t.size < 8:
                t = int_type(8, t.signed)
            keys.append(t)
        return _key_shape(keys)

    def check_key(self, m: ast.Map) -> None:
        """A use of ``m`` must have the key of the map's first use (checked
        from the second pass on, as bpftrace does; bpftrace's message)."""
        if self.pass_n < 2:
            return
        name = "@" + m.name
        key = self.key_of(m)
        if name not in self.keys:
            self.keys[name] = key
            return
        old = self.keys[name]
        ok = (key is None and old is None) or (
            key is not None and old is not None and _same_kind(key, old)
            and (key.kind == "tuple") == (old.kind == "tuple"))
        if not ok:
            self.error(f"Argument mismatch for {name}: trying to access with arguments: "
                       f"{_key_str(key)} when map expects arguments: {_key_str(old)}", m.pos)
        elif key is not None and old is not None:
            self.keys[name] = _merge(old, key, packed=True)

    def map_read(self, m: ast.Map) -> Type:
        """The value type of a map read (aggregations read as integers)."""
        self.map_keys(m)
        self.check_key(m)
        name = "@" + m.name
        info = self.maps.get(name)
        if info is None:
            self.error(f"Undefined map: {name}", m.pos, final=True)
            return NONE
        if info.value.kind in ("count", "sum", "min", "max", "avg"):
            return int_type(8, info.value.signed)
        return info.value

    # -- expressions -----------------------------------------------------
    def expr(self, e: ast.Expr, assigned_to: str | None = None) -> Type:
        """Type ``e`` (sets ``e.type``) and return the type."""
        t = self._expr(e, assigned_to)
        e.type = t
        return t

    def _expr(self, e: ast.Expr, assigned_to: str | None) -> Type:  # noqa: C901
        if isinstance(e, ast.Integer):
            return I64
        if isinstance(e, ast.String):
            return string_type(len(e.value.encode()) + 1)
        if isinstance(e, ast.Builtin):
            return self.builtin(e)
        if isinstance(e, ast.Variable):
            t = self.p.vars.get(e.name) if self.p else None
            if t is None:
                self.error(f"Undefined or undeclared variable: ${e.name}", e.pos)
                return NONE
            return t
        if isinstance(e, ast.Map):
            return self.map_read(e)
        if isinstance(e, ast.PositionalParameter):
            return self.positional(e)
        if isinstance(e, ast.Call):
            return self.call(e, assigned_to)
        if isinstance(e, ast.Binop):
            return self.binop(e)
        if isinstance(e, ast.Unop):
            return self.unop(e)
        if isinstance(e, ast.Ternary):
            return self.ternary(e)
        if isinstance(e, ast.Cast):
            return self.cast(e)
        if isinstance(e, ast.Sizeof):
            return self.sizeof(e)
        if isinstance(e, ast.Tuple):
            elems = tuple(self.expr(x) for x in e.elems)
            for x in e.elems:
                if x.type is not None and x.type.is_aggregation:
                    self.error("Map type not allowed in a tuple", x.pos)
            return tuple_type(elems)
        if isinstance(e, ast.FieldAccess):
            return self.field(e)
        if isinstance(e, ast.ArrayAccess):
            base = self.expr(e.expr)
            self.expr(e.index)
            if base.kind == "pointer" and base.elem is not None:
                return base.elem
            self.error("The array index operator [] can only be used on arrays and pointers, "
                       f"found {_kind_name(base)}.", e.pos)
            return NONE
        if isinstance(e, ast.Identifier):
            if e.name in INT_NAMES:
                return NONE
            self.error(f"Unknown identifier: '{e.name}'", e.pos)
            return NONE
        return NONE

    def const_int(self, e: ast.Expr) -> int | None:
        """The value of a constant integer expression (literal or ``$N``)."""
        if isinstance(e, ast.Integer):
            return e.value
        if isinstance(e, ast.PositionalParameter):
            return len(self.params) if e.count else param_int(self.param(e.index))
        if isinstance(e, ast.Unop) and e.op == "-":
            v = self.const_int(e.operand)
            return None if v is None else -v
        return None

    def positional(self, e: ast.PositionalParameter) -> Type:
        """``$N``/``$#``: an ``int64``. Inside ``str()`` a parameter is its
        text (``str($1)``, ``str($1 + 2)``); elsewhere it must be a number
        (a missing one is 0)."""
        in_str = bool(self.calls) and self.calls[-1] == "str"
        if e.count:
            if in_str:
                self.error("use $#, not str($#)", e.pos)
            return I64
        if in_str:
            self.str_param = True
        elif self.final and param_int(self.param(e.index)) is None:
            self.error(f"${e.index} used numerically but given \"{self.param(e.index)}\". "
                       f"Try using str(${e.index}).", e.pos)
        return I64

    def param(self, n: int) -> str:
        """Positional parameter ``n`` (1-based) as given, ``""`` when missing."""
        return self.params[n - 1] if 0 < n <= len(self.params) else ""

    def builtin(self, e: ast.Builtin) -> Type:  # noqa: C901 - one case per builtin
        """The type of a builtin variable, refused where the probe lacks it."""
        name = e.name
        p = self.p
        assert p is not None
        if name in ("nsecs", "elapsed", "pid", "tid", "cgroup", "uid", "gid", "cpu", "rand",
                    "numaid"):
            return U64
        if name == "comm":
            return string_type(COMM_SIZE)
        if name in ("kstack", "ustack"):
            return Type(name, 8)
        if name == "probe":
            return Type("probe", 8)
        if name == "username":
            return Type("username", 8)
        if name == "cpid":
            return U32
        if name == "retval":
            kind = p.single_provider()
            if kind not in ("uretprobe", "kretprobe", "kretfunc"):
                hint = " (try to use args->ret instead)" if kind == "tracepoint" else ""
                self.error("The retval builtin can only be used with 'kretprobe' and "
                           f"'uretprobe' and 'kfunc' probes{hint}", e.pos)
                return U64
            ap = p.probe.attach_points[0]
            return self.resolver.retval_type(ap) if self.resolver else U64
        if name == "func":
            for prov in p.providers:
                if prov in ("kprobe", "kretprobe", "kfunc", "kretfunc"):
                    return Type("ksym", 8)
                if prov not in ("uprobe", "uretprobe"):
                    self.error(f"The func builtin can not be used with '{prov}' probes",
                               e.pos)
                    return NONE
            return USYM
        if name == "args":
            return self.args_builtin(e)
        if name.startswith(("arg", "sarg")):
            return self.arg(e)
        if name in ("curtask", "ctx"):
            return U64
        self.error(f"Unknown builtin variable: '{name}'", e.pos)
        return NONE

    def arg(self, e: ast.Builtin) -> Type:
        """``argN``/``sargN``: from the resolver (bpftrace's ``uint64`` without
        one); only in uprobes, kprobes and USDT probes."""
        p = self.p
        assert p is not None
        sarg = e.name.startswith("s")
        allowed = ("kprobe", "uprobe") if sarg else ("kprobe", "uprobe", "usdt")
        for prov in p.providers:
            if prov not in allowed:
                which = "'kprobes' and 'uprobes' probes" if sarg else \
                    "'kprobes', 'uprobes' and 'usdt' probes"
                self.error(f"The {e.name} builtin can only be used with {which}", e.pos)
                return U64
        n = int(e.name[4:] if sarg else e.name[3:])
        if not sarg and n > 5 and "usdt" not in p.providers:
            self.error(f"x86_64 doesn't support {e.name}", e.pos)
        if self.resolver is None or sarg:
            return U64
        types = [self.resolver.arg_type(ap, n) for ap in p.probe.attach_points]
        return types[0]

    def args_builtin(self, e: ast.Builtin) -> Type:
        """``args``: a tracepoint's record from the resolver."""
        p = self.p
        assert p is not None
        kind = p.single_provider()
        if kind in ("uprobe", "kfunc", "kretfunc"):
            # bpftrace reads these from DWARF or BTF
            self.error(f"args in {kind} probes needs the function's debug information, which "
                       "pyebpf does not read: use arg0, arg1...", e.pos)
            return NONE
        if kind != "tracepoint":
            self.error("The args builtin can only be used with tracepoint/kfunc/uprobe"
                       f"probes ({kind} used here)", e.pos)
            return NONE
        if self.resolver is None:
            return Type("record")
        rec = self.resolver.args_record(p.probe.attach_points[0])
        return rec if rec is not None else Type("record")

    def field(self, e: ast.FieldAccess) -> Type:
        """``x.f``, ``x->f`` (a tracepoint's ``args``), ``t.0`` (a tuple)."""
        base = self.expr(e.expr)
        index = e.field.isdigit()
        if base.kind == "pointer" and not e.arrow:
            self.error(f"Can not access field '{e.field}' on type '{_tstr(base)}'. Try "
                       "dereferencing it first, or using '->'", e.pos)
            return NONE
        if base.kind == "tuple" and index:
            i = int(e.field)
            if i >= len(base.elems):
                self.error(f"Invalid tuple index: {i}. Found {len(base.elems)} elements in "
                           "tuple.", e.pos, final=True)
                return NONE
            return base.elems[i]
        if base.kind == "record" and not index:
            return self.record_field(e, base)
        if base.kind != "none":
            what = f"index {e.field}" if index else f"field '{e.field}'"
            self.error(f"Can not access {what} on expression of type '{_tstr(base)}'",
                       e.pos, final=True)
        return NONE

    def record_field(self, e: ast.FieldAccess, rec: Type) -> Type:
        """A field of a record (``args->filename``)."""
        if not rec.fields:     # no resolver: the fields are not known here
            return U64
        for fname, _off, ftype in rec.fields:
            if fname == e.field:
                return ftype
        ap = self.p.probe.attach_points[0] if self.p else None
        name = "_tracepoint_" + "_".join(ap.parts) if ap and ap.parts else "args"
        self.error(f"Struct/union of type 'struct {name}' does not contain a field named "
                   f"'{e.field}'", e.pos)
        return NONE

    def binop(self, e: ast.Binop) -> Type:
        """A binary operation: 64-bit, signed when both sides are (a shift: its
        left side); strings compare with ``==``/``!=`` only."""
        lt = self.expr(e.left)
        rt = self.expr(e.right)
        if lt.kind == "int" and rt.kind == "int" and self.calls and self.calls[-1] == "str":
            self.str_offset(e)
        return self.binop_type(e.op, lt, rt, _span(e.left.pos, e.right.pos), e.pos)

    def binop_type(self, op: str, lt: Type, rt: Type, span: ast.Pos, at: ast.Pos) -> Type:
        """The type of ``lt op rt`` as bpftrace gives it (always a 64-bit
        integer), and its last-pass checks: ``span`` covers both operands,
        ``at`` is the operator."""
        signed = lt.signed if op in ("<<", ">>") else (lt.signed and rt.signed)
        result = int_type(8, signed)
        if (lt.kind == "int" and rt.kind == "int") or "pointer" in (lt.kind, rt.kind):
            return result
        if lt.kind != rt.kind:
            self.error(f"Type mismatch for '{op}': comparing '{_tstr(lt)}' with "
                       f"'{_tstr(rt)}'", span, final=True)
        elif op not in ("==", "!="):
            self.error(f"The {op} operator can not be used on expressions of types "
                       f"{_tstr(lt)}, {_tstr(rt)}", at, final=True)
        return result

    def str_offset(self, e: ast.Binop) -> None:
        """Inside ``str()``, a parameter may only be offset by a constant
        within its length (``str($1 + 2)``), as bpftrace allows."""
        param, offset = e.left, e.right
        if not isinstance(param, ast.PositionalParameter):
            param, offset = e.right, e.left
        if not isinstance(param, ast.PositionalParameter) or param.count:
            return
        n = len(self.param(param.index))
        if not (isinstance(offset, ast.Integer) and e.op == "+" and 0 <= offset.value <= n):
            self.error("only addition of a single constant less or equal to the length of "
                       f"${param.index} (which is {n}) is allowed inside str()",
                       _span(e.pos, e.right.pos), final=True)

    def unop(self, e: ast.Unop) -> Type:
        """A unary operation (``- ~ ! * ++ --``) as bpftrace types it: ``!``
        an unsigned integer of its operand's size, ``*`` of an integer a
        ``uint64``, the others a 64-bit integer of the operand's sign."""
        if e.op in ("++", "--") and isinstance(e.operand, ast.Map):
            name = "@" + e.operand.name
            if name not in self.maps:   # ++ on a new map makes it an int64
                self.maps[name] = MapInfo(name, self.key_of_unevaluated(e.operand), I64)
        t = self.expr(e.operand)
        pointer_op = e.op in ("++", "--", "*")
        if t.kind != "int" and not (t.kind == "pointer" and pointer_op):
            name = "dereference" if e.op == "*" else e.op
            self.error(f"The {name} operator can not be used on expressions of type "
                       f"'{_tstr(t)}'", e.pos, final=True)
        if e.op == "*":
            if t.kind == "pointer":
                return t.elem or U64
            return U64
        if e.op == "!":
            if t.size not in (0, 1, 2, 4, 8):
                # bpftrace checks this size on every pass
                self.error(f"The ! operator can not be used on expressions of type "
                           f"'{_tstr(t)}'", e.pos)
                return U64
            return int_type(t.size or 8, False)
        if t.kind == "pointer" and pointer_op:
            return t
        return int_type(8, t.signed)

    def key_of_unevaluated(self, m: ast.Map) -> Type | None:
        """The key type of ``m`` before its keys were typed (for ``@x[k]++``
        creating ``@x``): typed now."""
        self.map_keys(m)
        return self.key_of(m)

    def ternary(self, e: ast.Ternary) -> Type:
        """``c ? a : b``: both branches of one kind, an integer condition."""
        ct = self.expr(e.cond)
        tt = self.expr(e.then)
        et = self.expr(e.else_)
        if tt.kind != et.kind:
            self.error(f"Ternary operator must return the same type: have "
                       f"'{_kind_name(tt)}' and '{_kind_name(et)}'", e.pos, final=True)
        if ct.kind != "int":
            self.error(f"Invalid condition in ternary: {_kind_name(ct)}", e.pos, final=True)
        if tt.kind == "string":
            return string_type(STRLEN)
        if tt.kind == "int":
            return int_type(8, tt.signed)
        if tt.kind != "none":
            self.error(f"Ternary return type unsupported {_kind_name(tt)}", e.pos)
        return NONE

    def cast(self, e: ast.Cast) -> Type:
        """``(int8)e``..``(uint64)e`` truncate or extend; ``(T *)`` makes a
        pointer; structs are refused (no C headers here)."""
        inner = self.expr(e.expr)
        name = e.typename
        if inner.kind == "record":
            self.error(f'Cannot cast from struct type "{_tstr(inner)}"', e.pos)
        elif inner.kind == "none":
            self.error('Cannot cast from "none" type', e.pos)
        base, _, stars = name.partition(" *")
        if base in INT_NAMES:
            size, signed = INT_NAMES[base]
            t = int_type(size, signed)
            if name != base:
                t = Type("pointer", 8, elem=t)
                if stars:       # "**"
                    t = Type("pointer", 8, elem=t)
            elif inner.kind not in ("int", "record", "pointer", "none"):
                self.error(f'Casts are not supported for type: "{_tstr(inner)}"', e.pos)
            return t
        self.error(f"Unknown struct/union: '{base}'", e.pos)
        return NONE

    def sizeof(self, e: ast.Sizeof) -> Type:
        """``sizeof(T)`` or ``sizeof(e)``: a ``uint64``."""
        if e.typename is not None:
            if e.typename not in INT_NAMES:
                self.error(f"Unknown struct/union: '{e.typename}'", e.pos)
        elif e.expr is not None:
            self.expr(e.expr)
        return U64

    # -- calls -------------------------------------------------------------
    def call(self, c: ast.Call, assigned_to: str | None) -> Type:
        """Type a call and check it as bpftrace does (see :func:`_check_call`)."""
        return _check_call(self, c, assigned_to)


def analyse(script: ast.Script, resolver: TypeResolver | None = None, *,
            params: Sequence[str] = ()) -> Analysis:
    """Type ``script`` in place (``expr.type``) and return its
    :class:`Analysis`; raises :class:`~pyebpf.lang.errors.LangError` with
    every semantic error found (bpftrace's messages and positions).

    ``resolver`` types ``argN``, ``retval`` and a tracepoint's ``args`` (see
    :class:`TypeResolver`); ``params`` are the positional parameters
    (``$1``...; a number is an integer, else a string)."""
    return Analyser(script, resolver, params).run()


# ---- calls -----------------------------------------------------------------

def _nargs(a: Analyser, c: ast.Call, n: int) -> bool:
    """bpftrace's ``check_nargs``."""
    got = len(c.args)
    if got == n:
        return True
    want = "no arguments" if n == 0 else "one argument" if n == 1 else f"{n} arguments"
    a.error(f"{c.name}() requires {want} ({got} provided)", c.pos)
    return False


def _varargs(a: Analyser, c: ast.Call, lo: int, hi: int) -> bool:
    """bpftrace's ``check_varargs``."""
    got = len(c.args)
    if got < lo:
        want = "at least one argument" if lo == 1 else f"at least {lo} arguments"
        a.error(f"{c.name}() requires {want} ({got} provided)", c.pos)
        return False
    if got > hi:
        want = ("requires no arguments" if hi == 0 else "takes up to one argument"
                if hi == 1 else f"takes up to {hi} arguments")
        a.error(f"{c.name}() {want} ({got} provided)", c.pos)
        return False
    return True


def _arg(a: Analyser, c: ast.Call, kind: str, i: int, literal: bool = False) -> bool:
    """bpftrace's ``check_arg``: argument ``i`` is of ``kind`` (a literal)."""
    if i >= len(c.args):
        return False
    arg = c.args[i]
    t = arg.type or NONE
    name = _KIND_NAMES.get(kind, kind)
    is_lit = isinstance(arg, (ast.Integer, ast.String)) or (
        isinstance(arg, ast.PositionalParameter)) or (
        kind == "int" and a.const_int(arg) is not None)
    if literal and (not is_lit or t.kind != kind):
        a.error(f"{c.name}() expects a {name} literal ({_kind_name(t)} provided)", c.pos)
        return False
    if t.kind != kind and t.kind != "none":
        a.error(f"{c.name}() only supports {name} arguments ({_kind_name(t)} provided)",
                c.pos, final=True)
        return False
    return True


def _assignment(a: Analyser, c: ast.Call, assigned_to: str | None, want: str | None) -> None:
    """bpftrace's ``check_assignment`` for the two cases the language uses:
    aggregations (``want="map"``) and statements (``want=None``)."""
    if want == "map" and assigned_to != "map":
        a.error(f"{c.name}() should be directly assigned to a map", c.pos)
    elif want is None and assigned_to is not None:
        a.error(f"{c.name}() should not be used in an assignment or as a map key", c.pos)


def _map_arg(a: Analyser, c: ast.Call, what: str) -> None:
    """delete/clear/zero/print of a map."""
    m = c.args[0]
    if not isinstance(m, ast.Map):
        a.error(f"{c.name}() expects a map to be provided", c.pos)
        return
    if what != "delete" and m.keys:
        a.error(f"The map passed to {c.name}() should not be indexed by a key", c.pos)


if TYPE_CHECKING:
    from typing import Callable
    _Check = Callable[[Analyser, ast.Call, "str | None"], Type]

#: function name -> its check (which also gives the call's type)
_CALL_CHECKS: dict[str, _Check] = {}


def _call(name: str) -> Callable[[_Check], _Check]:
    """Register the decorated function as the check of ``name()``."""
    def register(fn: _Check) -> _Check:
        _CALL_CHECKS[name] = fn
        return fn
    return register


def _check_call(a: Analyser, c: ast.Call, assigned_to: str | None) -> Type:
    if c.name not in _KNOWN_FUNCS:
        a.error(f"{c.name}() is not supported by pyebpf", c.pos)
        for x in c.args:
            a.expr(x)
        return NONE
    # a map argument of delete/clear/zero/print is named, not read
    a.calls.append(c.name)
    a.str_param = False
    try:
        _type_args(a, c)
    finally:
        a.calls.pop()
    if a.p is not None and c.name in _ONLY_IN:
        for ap in a.p.probe.attach_points:
            if ap.provider not in _ONLY_IN[c.name]:
                a.error(f'{c.name} can not be used with "{ap.provider}" probes', c.pos)
    check = _CALL_CHECKS.get(c.name)
    return check(a, c, assigned_to) if check else NONE


def _type_args(a: Analyser, c: ast.Call) -> None:
    """Type a call's arguments (a map given to delete/clear/zero/print is
    named, not read; a stack mode is a word)."""
    for i, x in enumerate(c.args):
        if i == 0 and c.name in ("delete", "clear", "zero", "print") and isinstance(x, ast.Map):
            a.map_keys(x)
            if c.name == "delete":
                a.check_key(x)
            info = a.maps.get("@" + x.name)
            if info is None:
                a.error(f"Undefined map: @{x.name}", x.pos, final=True)
            x.type = info.value if info else NONE
        elif c.name in ("ustack", "kstack") and isinstance(x, ast.Identifier) \
                and x.name in ("bpftrace", "perf"):
            x.type = NONE
        else:
            a.expr(x)


@_call("count")
def _count(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, "map")
    _nargs(a, c, 0)
    return Type("count", 8)


def _agg1(kind: str) -> _Check:
    """The check of a one-argument aggregation (sum, min, max, avg, stats, hist)."""
    def check(a: Analyser, c: ast.Call, to: str | None) -> Type:
        _assignment(a, c, to, "map")
        signed = True
        if _nargs(a, c, 1) and _arg(a, c, "int", 0):
            t = c.args[0].type
            signed = bool(t and t.signed) if kind in ("sum", "min", "max") else True
        return Type(kind, 8, signed)
    return check


for _k in ("sum", "min", "max", "avg", "stats", "hist"):
    _CALL_CHECKS[_k] = _agg1(_k)


@_call("lhist")
def _lhist(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, "map")
    if not _nargs(a, c, 4):
        return Type("lhist", 8)
    _arg(a, c, "int", 0)
    vals = []
    for i in (1, 2, 3):
        _arg(a, c, "int", i, literal=True)
        vals.append(a.const_int(c.args[i]))
    lo, hi, step = vals
    if None in vals:
        return Type("lhist", 8)
    assert lo is not None and hi is not None and step is not None
    if step < 1:
        a.error(f"lhist() step must be >= 1 ({step} provided)", c.pos)
    elif (hi - lo) // step > 1000:
        a.error(f"lhist() too many buckets, must be <= 1000 (would need "
                f"{(hi - lo) // step})", c.pos)
    if lo < 0:
        a.error(f"lhist() min must be non-negative (provided min {lo})", c.pos)
    elif lo > hi:
        a.error(f"lhist() min must be less than max (provided min {lo} and max {hi})",
                c.pos)
    elif step >= 1 and hi - lo < step:
        a.error(f"lhist() step is too large for the given range (provided step {step} "
                f"for range {hi - lo})", c.pos)
    return Type("lhist", 8, lhist=(lo, hi, step))


@_call("delete")
def _delete(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if _nargs(a, c, 1):
        _map_arg(a, c, "delete")
    return NONE


@_call("clear")
@_call("zero")
def _clear(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if _nargs(a, c, 1):
        _map_arg(a, c, c.name)
    return NONE


@_call("str")
def _str(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if not _varargs(a, c, 1, 2):
        return string_type(STRLEN)
    arg = c.args[0]
    t = arg.type or NONE
    if t.kind not in ("int", "pointer", "none"):
        a.error(f"str() expects an integer or a pointer type as first argument "
                f"({_tstr(t)} provided)", c.pos)
    if a.str_param and not isinstance(arg, ast.PositionalParameter) and not (
            isinstance(arg, ast.Binop) and (isinstance(arg.left, ast.PositionalParameter)
                                            or isinstance(arg.right, ast.PositionalParameter))):
        a.error("str() only accepts positional parameters directly or with a single constant "
                "offset added", c.pos)
    if len(c.args) == 2 and _arg(a, c, "int", 1):
        n = a.const_int(c.args[1])
        if n is not None and n < 0:
            a.error(f"strcannot use negative length ({n})", c.pos)
    # bpftrace's type whatever the length: str(p, n) reads n characters at
    # most (and a NUL) into a string of BPFTRACE_STRLEN bytes
    return string_type(STRLEN)


@_call("buf")
def _buf(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if not _varargs(a, c, 1, 2):
        return Type("buffer", STRLEN)
    size = STRLEN
    if len(c.args) == 1:
        a.error("buf() expects a length argument for non-array type "
                f"{_kind_name(c.args[0].type)}", c.pos)
    elif _arg(a, c, "int", 1):
        n = a.const_int(c.args[1])
        if n is not None:
            if n < 0:
                a.error(f"buf cannot use negative length ({n})", c.pos)
            size = max(0, min(n, STRLEN))
    return Type("buffer", size)


@_call("ksym")
@_call("usym")
def _sym(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1):
        t = c.args[0].type or NONE
        if t.kind not in ("int", "pointer", "none"):
            a.error(f"{c.name}() expects an integer or pointer argument", c.pos)
    return USYM if c.name == "usym" else Type("ksym", 8)


@_call("ntop")
def _ntop(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if not _varargs(a, c, 1, 2):
        return Type("inet", 24)
    if len(c.args) == 2:
        _arg(a, c, "int", 0)
    t = c.args[-1].type or NONE
    if t.kind not in ("int", "none", "buffer", "string"):
        a.error(f"ntop() expects an integer or array argument, got {t.kind}", c.pos)
    elif t.kind in ("buffer", "string") and t.size not in (4, 16):
        a.error("ntop() argument must be 4 or 16 bytes in size", c.pos)
    return Type("inet", 24)


@_call("join")
def _join(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if _varargs(a, c, 1, 2):
        t = c.args[0].type or NONE
        if t.kind not in ("int", "pointer", "none"):
            a.error(f"() only supports int or pointer arguments ({t.kind} provided)", c.pos)
        if len(c.args) == 2:
            _arg(a, c, "string", 1, literal=True)
    return NONE


@_call("reg")
def _reg(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1) and _arg(a, c, "string", 0, literal=True):
        name = c.args[0].value if isinstance(c.args[0], ast.String) else ""
        if name not in _X86_REGS:
            a.error(f"'{name}' is not a valid register on this architecture (x86_64)",
                    c.pos)
    return U64


@_call("kaddr")
@_call("uaddr")
@_call("cgroupid")
def _addr(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1):
        _arg(a, c, "string", 0, literal=True)
    return U64


@_call("printf")
@_call("system")
@_call("cat")
def _printf(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if not _varargs(a, c, 1, 128) or not _arg(a, c, "string", 0, literal=True):
        return NONE
    fmt = c.args[0]
    assert isinstance(fmt, ast.String)
    msg = printf_check(fmt.value, [x.type or NONE for x in c.args[1:]], c.name)
    if msg:
        a.error(msg, c.pos, final=True)
    return NONE


@_call("exit")
def _exit(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    _nargs(a, c, 0)
    return NONE


# (duplicates: deliberate, print() and signal() check one argument by its kind alike)
@_call("print")
def _print(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if not _varargs(a, c, 1, 3):
        return NONE
    arg = c.args[0]
    if isinstance(arg, ast.Map):
        if arg.keys:
            a.error(f"The map passed to {c.name}() should not be indexed by a key", c.pos)
        for i in (1, 2):
            if i < len(c.args):
                _arg(a, c, "int", i, literal=True)
    elif len(c.args) > 1:
        a.error(f"Non-map print() only takes 1 argument, {len(c.args)} found", c.pos)
    return NONE


@_call("time")
def _time(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if _varargs(a, c, 0, 1) and c.args:
        _arg(a, c, "string", 0, literal=True)
    return NONE


@_call("strftime")
def _strftime(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _varargs(a, c, 2, 2):
        _arg(a, c, "string", 0, literal=True)
        _arg(a, c, "int", 1)
    return Type("timestamp", 16)


@_call("strncmp")
def _strncmp(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 3):
        _arg(a, c, "string", 0)
        _arg(a, c, "string", 1)
        if _arg(a, c, "int", 2, literal=True):
            n = a.const_int(c.args[2])
            if n is not None and n < 0:
                a.error(f"Builtin strncmp requires a non-negative size", c.pos)
    return U64


@_call("signal")
def _signal(a: Analyser, c: ast.Call, to: str | None) -> Type:
    _assignment(a, c, to, None)
    if not _varargs(a, c, 1, 1):
        return NONE
    arg = c.args[0]
    if isinstance(arg, ast.String):
        if signal_number(arg.value) is None:
            a.error(f"{arg.value} is not a valid signal", c.pos)
    elif isinstance(arg, ast.Integer):
        if not 1 <= arg.value <= 64:
            a.error(f"{arg.value} is not a valid signal, allowed range: [1,64]", c.pos)
    elif (arg.type or NONE).kind != "int":
        a.error("signal only accepts string literals or integers", c.pos)
    return NONE


@_call("kstack")
@_call("ustack")
def _stack(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if not _varargs(a, c, 0, 2):
        return Type(c.name, 8)
    mode, limit = "bpftrace", 127
    args = list(c.args)
    first = args[0] if args else None
    if isinstance(first, ast.Identifier):
        args.pop(0)
        mode = first.name   # another word was refused as an unknown identifier
    if args:
        n = a.const_int(args[0])
        if n is None:
            a.error(f"{c.name}() expects a integer literal ({_kind_name(args[0].type)} "
                    "provided)", c.pos)
            return Type(c.name, 8, stack_mode=mode)
        n &= (1 << 64) - 1    # bpftrace reads the limit unsigned
        if n > 1024:
            a.error(f"{c.name}([int limit]): limit shouldn't exceed 1024, {n} given", c.pos)
        else:
            limit = n
    return Type(c.name, 8, stack_mode=mode, stack_limit=limit)


# ---- printf formats ----------------------------------------------------------

#: printf conversions (bpftrace 0.17's table): length modifiers + letter -> kind
_PRINTF_TYPES = {"s": "string", "r": "buffer", "rx": "buffer", "rh": "buffer", "c": "int"}
for _len in ("", "hh", "h", "l", "ll", "j", "z", "t"):
    for _conv in "duoxXp":
        _PRINTF_TYPES[_len + _conv] = "int"
#: kinds printf shows as strings
_AS_STRING = frozenset({"ksym", "usym", "probe", "username", "kstack", "ustack", "inet",
                        "timestamp"})


def printf_specs(fmt: str) -> list[str]:
    """The conversions of a printf format as bpftrace finds them: ``%``,
    an optional ``-``, a width, a ``.precision``, then one of its
    conversions (``d``, ``llu``, ``s``, ``r``...). Anything else after a
    ``%`` is text (bpftrace has no ``%%``)."""
    out = []
    i = fmt.find("%")
    n = len(fmt)
    while i >= 0:
        j = i + 1
        if j < n and fmt[j] == "-":
            j += 1
        while j < n and fmt[j].isdigit():
            j += 1
        if j + 1 < n and fmt[j] == "." and fmt[j + 1].isdigit():
            j += 1
            while j < n and fmt[j].isdigit():
                j += 1
        conv = next((fmt[j:j + k] for k in (3, 2, 1) if fmt[j:j + k] in _PRINTF_TYPES), None)
        if conv is None:
            i = fmt.find("%", i + 1)
            continue
        out.append(conv)
        i = fmt.find("%", j + len(conv))
    return out


def printf_check(fmt: str, args: list[Type], func: str = "printf") -> str | None:
    """bpftrace's check of a printf format against its arguments' types:
    the error message, or None."""
    specs = printf_specs(fmt)
    if len(args) < len(specs):
        return (f"{func}: Not enough arguments for format string ({len(args)} supplied, "
                f"{len(specs)} expected)")
    if len(args) > len(specs):
        return (f"{func}: Too many arguments for format string ({len(args)} supplied, "
                f"{len(specs)} expected)")
    for spec, t in zip(specs, args):
        kind = "string" if t.kind in _AS_STRING else "int" if t.kind == "pointer" else t.kind
        want = _PRINTF_TYPES[spec]
        if kind != want:
            return (f"{func}: %{spec} specifier expects a value of type "
                    f"{_KIND_NAMES.get(want, want)} ({_kind_name(Type(kind))} supplied)")
    return None
