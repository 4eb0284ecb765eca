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

The analyser's parts: expressions (:mod:`~pyebpf.lang.sema_exprs`), the
checks of calls and printf formats (:mod:`~pyebpf.lang.sema_calls`), the
tables, results and common helpers (:mod:`~pyebpf.lang.sema_base`); the
driver, statements and maps are here.
"""
from __future__ import annotations

from . import ast
from .errors import LangError
from .sema_base import (_PASSES, STRLEN, Analysis, MapInfo, _key_shape, _key_str, _kind_name,
                        _merge, _Probe, _same_kind, _span, _tstr, attach_point_number,
                        param_int, signal_number)
from .sema_calls import _check_call, printf_check, printf_specs
from .sema_exprs import _ExprTyping
from .types import NONE, Type, int_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, Sequence

    class TypeResolver(Protocol):
        """What the semantic pass asks the probes' layer about an attach point."""

        def arg_type(self, ap: ast.AttachPoint, n: int) -> Type:
            """The type of ``argN`` (int64 by default; USDT: the spec's)."""

        def args_record(self, ap: ast.AttachPoint) -> Type | None:
            """A tracepoint's (or a uprobe's, from DWARF) ``args``: a
            ``record`` Type, or None."""

        def struct_type(self, ap: ast.AttachPoint, name: str) -> Type | None:
            """``struct NAME`` as the probed program defines it (DWARF), or
            None (optional: the kernel's BTF is asked next)."""

        def retval_type(self, ap: ast.AttachPoint) -> Type:
            """The type of ``retval``."""
else:
    TypeResolver = object

__all__ = ["analyse", "Analysis", "MapInfo", "TypeResolver", "STRLEN", "signal_number", "param_int",
           "printf_specs", "printf_check"]


class Analyser(_ExprTyping):
    """One analysis of one script (:func:`analyse` is the entry point)."""

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
        the units and rates of timed probes, the counts of perf events."""
        if ap.provider in ("BEGIN", "END"):
            if self.final and ap.provider in self.seen_special:
                self.error(f"More than one {ap.provider} probe defined", ap.pos)
            self.seen_special.add(ap.provider)
        elif ap.provider in ("profile", "interval") and len(ap.parts) == 2:
            self.check_rate(ap)
        elif ap.provider in ("software", "hardware") and len(ap.parts) == 2:
            self.check_count(ap)

    def check_rate(self, ap: ast.AttachPoint) -> None:
        """``profile:hz:99``, ``interval:s:1``: a number as bpftrace reads it
        (:func:`~pyebpf.lang.sema_base.attach_point_number`; when it is not
        one, that is the only error, as bpftrace's attach point parser stops
        there), a unit bpftrace accepts, a positive profile frequency."""
        unit, rate = ap.parts
        try:
            value = attach_point_number(rate)
        except LangError as err:
            self.error(err.message, ap.pos)
            return
        if unit not in ("hz", "s", "ms", "us"):
            self.error(f"{unit} is not an accepted unit of time", ap.pos)
        if value <= 0 and ap.provider == "profile":
            self.error("profile frequency should be a positive integer", ap.pos)

    def check_count(self, ap: ast.AttachPoint) -> None:
        """``software:faults:100``, ``hardware:cycles:1e6``: a number as
        bpftrace reads it, not negative (0 is the event's default count)."""
        try:
            value = attach_point_number(ap.parts[1])
        except LangError as err:
            self.error(err.message, ap.pos)
            return
        if value < 0:        # bpftrace's words: "frequency" for hardware
            what = "frequency" if ap.provider == "hardware" else "count"
            self.error(f"{ap.provider} {what} should be a positive integer", ap.pos)

    # -- statements ------------------------------------------------------
    def block(self, block: ast.Block) -> None:
        """Check a block's statements in order."""
        for stmt in block.stmts:
            self.stmt(stmt)

    #: the method that checks each kind of statement
    _STMTS = {
        ast.ExprStmt: "expr_statement", ast.AssignMap: "assign_map", ast.AssignVar: "assign_var",
        ast.If: "if_", ast.Unroll: "unroll", ast.While: "while_", ast.Jump: "jump"}

    def stmt(self, s: ast.Stmt) -> None:
        """Check one statement."""
        method = self._STMTS.get(type(s))
        if method is not None:
            getattr(self, method)(s)

    def expr_statement(self, s: ast.ExprStmt) -> None:
        """An expression as a statement (a call, ``@x++``)."""
        self.expr(s.expr)

    def if_(self, s: ast.If) -> None:
        """``if (c) {...} else {...}``: an integer condition."""
        self.expr(s.cond)
        # bpftrace 0.17 gives an if no position: it reports 1:1-1
        self.truthy(s.cond, "if()", ast.Pos(1, 1, 1))
        self.block(s.then)
        if s.else_ is not None:
            self.block(s.else_)

    def while_(self, s: ast.While) -> None:
        """``while (c) {...}``: an integer condition; ``break``/``continue`` allowed inside."""
        self.expr(s.cond)
        self.truthy(s.cond, "while()", s.pos)
        self.loops += 1
        self.block(s.body)
        self.loops -= 1

    def jump(self, s: ast.Jump) -> None:
        """``break`` and ``continue`` only in a loop."""
        if s.kind != "return" and not self.loops:
            self.error(f"{s.kind} used outside of a loop", s.pos)

    def truthy(self, e: ast.Expr, where: str, pos: ast.Pos) -> None:
        """A condition must be an integer (bpftrace checks it on its last pass)."""
        t = e.type
        if t is not None and t.kind != "int":
            self.error(f"Invalid condition in {where}: {_kind_name(t)}", pos, final=True)

    def unroll(self, s: ast.Unroll) -> None:
        """``unroll (N)``: N a constant between 1 and 100."""
        self.expr(s.count)
        n = self.int_literal(s.count)
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
        shown = value                # the type bpftrace names in its messages
        value = self.copied(value, s.value)
        if value is not shown and name not in self.maps:
            self.copies[name] = shown
        info = self.maps.get(name)
        if info is None:
            stored = int_type(8, value.signed) if value.kind == "int" else value
            self.maps[name] = MapInfo(name, self.key_of(m), stored)
        elif info.value.kind == "none":
            if self.final:
                self.error(f"Undefined map: {name}", m.pos)
            else:
                info.value = int_type(8, value.signed) if value.kind == "int" else value
        elif shown.kind in ("record", "array") and shown.kind == info.value.kind and \
                not _same_kind(info.value, shown):        # (bpftrace's words, its quotes)
            self.error(f"Type mismatch for {name}: trying to assign value of type "
                       f"'{_tstr(shown)}' when map already contains a value of type "
                       f"'{_tstr(info.value)}''",
                       ast.Pos(s.pos.line, s.pos.column + 1, s.pos.column + 2))
        elif self.copies.get(name, info.value).kind != shown.kind:
            self.error(f"Type mismatch for {name}: trying to assign value of type "
                       f"'{_tstr(shown)}' when map already contains a value of type "
                       f"'{_tstr(self.copies.get(name, info.value))}", m.pos)
        elif value.kind in ("string", "tuple"):
            info.value = _merge(info.value, value)
        m.type = self.maps[name].value
        if value.kind == "none":
            self.error("Invalid expression for assignment: none", s.value.pos, final=True)

    def copied(self, t: Type, e: ast.Expr) -> Type:
        """What a map or tuple keeps of a value ``e`` of type ``t``: a read of
        a count/sum/min/max map is its integer, as bpftrace 0.17 copies it;
        an avg/stats/hist/lhist map's value cannot be read (bpftrace 0.17
        copies a part of it: an avg reads 0, a hist nothing)."""
        if not t.is_aggregation or isinstance(e, ast.Call):
            return t
        if t.kind in ("count", "sum", "min", "max"):
            return int_type(8, t.signed)
        article = "an" if t.kind in ("avg", "lhist") else "a"
        self.error(f"the value of {article} {t.kind}() map cannot be read in a probe "
                   "(bpftrace 0.17 copies only a part of it)", e.pos, final=True)
        return t

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
        if value.kind in ("avg", "stats", "hist", "lhist"):
            self.copied(value, s.value)     # (refused; count/sum/min/max keep their type)
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
        """The value type of a map read: an aggregation's read is of the
        aggregation's type, as bpftrace 0.17 types it (so arithmetic,
        comparisons with integers, conditions and printf refuse it; it can
        be assigned)."""
        self.map_keys(m)
        self.check_key(m)
        name = "@" + m.name
        info = self.maps.get(name)
        if info is None:
            self.error(f"Undefined map: {name}", m.pos, final=True)
            return NONE
        return info.value

    # -- calls -------------------------------------------------------------
    def call(self, c: ast.Call, assigned_to: str | None) -> Type:
        """Type a call and check it as bpftrace does (see :func:`_check_call`)."""
        return _check_call(self, c, assigned_to)


def analyse(script: ast.Script, resolver: TypeResolver | None = None, *,
            params: Sequence[str] = (), unsafe: bool = False) -> Analysis:
    """Type ``script`` in place (``expr.type``) and return its
    :class:`Analysis`; raises :class:`~pyebpf.lang.errors.LangError` with
    every semantic error found (bpftrace's messages and positions).

    ``resolver`` types ``argN``, ``retval`` and a tracepoint's ``args`` (see
    :class:`TypeResolver`); ``params`` are the positional parameters
    (``$1``...; a number is an integer, else a string); ``unsafe``: the
    unsafe functions (``system``) are allowed, as bpftrace's ``--unsafe``."""
    return Analyser(script, resolver, params, unsafe).run()
