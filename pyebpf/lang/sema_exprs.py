"""Types of expressions (part of :mod:`pyebpf.lang.sema`): literals,
builtins, positional parameters, fields, operators, ternaries, casts and
``sizeof``, with bpftrace 0.17's rules and messages."""
from __future__ import annotations

from . import ast
from .sema_base import (COMM_SIZE, I64, STRLEN, U32, U64, USYM, MapInfo, _AnalyserBase,
                        _kind_name, _span, _tstr, param_int)
from .types import INT_NAMES, NONE, Type, int_type, record_type, string_type, tuple_type


class _ExprTyping(_AnalyserBase):
    """The typing of expressions."""

    def expr(self, e: ast.Expr, assigned_to: str | None = None) -> Type:
        """Type ``e`` (sets ``e.type``) and return the type."""
        t = self._expr(e, assigned_to)
        e.type = t
        return t

    #: the method that types each kind of expression (a call's is :meth:`call`:
    #: it depends on where the call is written; another kind has no type)
    _TYPINGS = {
        ast.Integer: "integer", ast.String: "string", ast.Builtin: "builtin",
        ast.Variable: "variable", ast.Map: "map_read", ast.PositionalParameter: "positional",
        ast.Binop: "binop", ast.Unop: "unop", ast.Ternary: "ternary", ast.Cast: "cast",
        ast.Sizeof: "sizeof", ast.Tuple: "tuple_", ast.FieldAccess: "field",
        ast.ArrayAccess: "index", ast.Identifier: "identifier"}

    def _expr(self, e: ast.Expr, assigned_to: str | None) -> Type:
        if type(e) is ast.Call:
            return self.call(e, assigned_to)
        method = self._TYPINGS.get(type(e))
        return NONE if method is None else getattr(self, method)(e)

    def integer(self, e: ast.Integer) -> Type:
        """An integer literal: an ``int64``."""
        return I64

    def string(self, e: ast.String) -> Type:
        """A string literal: its bytes and the NUL."""
        return string_type(len(e.value.encode()) + 1)

    def variable(self, e: ast.Variable) -> Type:
        """``$v``: the type its assignments gave it in this probe."""
        t = self.p.vars.get(e.name) if self.p else None
        if t is None:
            self.error(f"Undefined or undeclared variable: ${e.name}", e.pos)
            return NONE
        return t

    def tuple_(self, e: ast.Tuple) -> Type:
        """``(a, b, ...)``: what a map keeps of each element, laid out as C's."""
        elems = tuple(self.expr(x) for x in e.elems)
        for x in e.elems:
            if x.type is not None and x.type.is_aggregation and isinstance(x, ast.Call):
                self.error("Map type not allowed in a tuple", x.pos)
        return tuple_type([self.copied(t, x) for t, x in zip(elems, e.elems)])

    def index(self, e: ast.ArrayAccess) -> Type:
        """``p[i]``: an element of what a pointer points to."""
        base = self.expr(e.expr)
        self.expr(e.index)
        if base.kind == "array" and base.elem is not None:
            i = self.const_int(e.index)
            if i is not None and not 0 <= i < base.count:
                self.error(f"the index {i} is out of bounds for array of size {base.count}",
                           e.pos)
            return base.elem
        if base.kind == "pointer" and base.elem is not None:
            if self.const_int(e.index) is None:
                self.error("The array index operator [] only accepts literal integer indices.",
                           e.pos)
            return base.elem
        self.error("The array index operator [] can only be used on arrays and pointers, "
                   f"found {_kind_name(base)}.", e.pos)
        return NONE

    def identifier(self, e: ast.Identifier) -> Type:
        """A bare name: a type name (as in ``sizeof``) or a kernel enumerator."""
        if e.name in INT_NAMES:
            return NONE
        if e.name in self.cdefs.enums:
            e.value = self.cdefs.enums[e.name]
            return U64           # an enumerator of the script's enums
        from .btftypes import enum_value
        if enum_value(e.name) is not None:
            return U64           # a kernel enumerator: bpftrace 0.17's uint64
        self.error(f"Unknown identifier: '{e.name}'", e.pos)
        return NONE

    def const_int(self, e: ast.Expr) -> int | None:
        """The value of a constant integer expression (literal or ``$N``)."""
        if isinstance(e, ast.Integer):
            return e.value
        if isinstance(e, ast.PositionalParameter):
            return self.param_number(e)
        if isinstance(e, ast.Unop) and e.op == "-":
            v = self.const_int(e.operand)
            return None if v is None else -v
        return None

    def positional(self, e: ast.PositionalParameter) -> Type:
        """``$N``/``$#``: an ``int64``. Inside ``str()`` a parameter is its
        text (``str($1)``, ``str($1 + 2)``); elsewhere it must be a number
        (a missing one is 0)."""
        in_str = bool(self.calls) and self.calls[-1] == "str"
        e.value = self.param_number(e)
        if e.count:
            if in_str:
                self.error("use $#, not str($#)", e.pos)
            return I64
        if in_str:
            self.str_param = True
        elif self.final and e.value is None:
            self.error(f"${e.index} used numerically but given \"{self.param(e.index)}\". "
                       f"Try using str(${e.index}).", e.pos)
        return I64

    def int_literal(self, e: ast.Expr) -> int | None:
        """:meth:`const_int` where bpftrace wants an integer literal (an
        unroll count, strncmp's size): a parameter that is no number is
        refused there and then (bpftrace's ``get_int_literal``)."""
        if isinstance(e, ast.PositionalParameter) and self.param_number(e) is None:
            self.error(f'${e.index} used numerically but given "{self.param(e.index)}"', e.pos)
            return None
        return self.const_int(e)

    def param_number(self, e: ast.PositionalParameter) -> int | None:
        """``$#``'s count, or ``$N``'s number (bpftrace's :func:`param_int`;
        a parameter not given at all is 0), None when ``$N`` is not one."""
        if e.count:
            return len(self.params)
        return param_int(self.params[e.index - 1]) if e.index <= len(self.params) else 0

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
        if name in ("kstack", "ustack", "pystack"):
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
        if name == "curtask":       # a task_struct pointer where the type is known
            rec = self.cdefs.record("struct task_struct")
            return U64 if rec is None else Type("pointer", 8, elem=record_type(rec))
        if name == "ctx":
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
        if kind == "uprobe":          # bpftrace reads it from the program's DWARF
            ap = p.probe.attach_points[0]
            rec = self.resolver.args_record(ap) if self.resolver is not None else None
            if rec is None:
                self.error(f"No debuginfo found for {ap.parts[0] if ap.parts else ap.raw}",
                           ap.pos)
                return NONE
            return rec
        if kind in ("kfunc", "kretfunc"):
            self.error(f"args in {kind} probes needs the function's debug information "
                       "(BTF of kernel functions): use arg0, arg1...", e.pos)
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
        if base.kind == "pointer" and base.elem is not None and base.elem.struct \
                and not index:
            return self.record_field(e, base.elem)
        if base.kind == "record" and not index:
            if e.arrow and base.struct is not None:
                self.error(f"Can not access field '{e.field}' on type '{_tstr(base)}'. Try "
                           "using '.'", e.pos)
                return NONE
            return self.record_field(e, base)
        if base.kind != "none":
            what = f"index {e.field}" if index else f"field '{e.field}'"
            self.error(f"Can not access {what} on expression of type '{_tstr(base)}'",
                       e.pos, final=True)
        return NONE

    def record_field(self, e: ast.FieldAccess, rec: Type) -> Type:
        """A field of a record (``args->filename``, ``task->comm``)."""
        if rec.struct is not None:
            return self.struct_member(e, rec)
        if not rec.fields:     # no resolver: the fields are not known here
            return U64
        for fname, _off, ftype in rec.fields:
            if fname == e.field:
                return ftype
        ap = self.p.probe.attach_points[0] if self.p else None
        if ap is not None and ap.provider in ("uprobe", "u") and \
                isinstance(e.expr, ast.Builtin) and e.expr.name == "args":
            self.error(f"Can't find function parameter {e.field}", e.pos)
            return NONE
        name = "_tracepoint_" + "_".join(ap.parts) if ap and ap.parts else "args"
        self.error(f"Struct/union of type 'struct {name}' does not contain a field named "
                   f"'{e.field}'", e.pos)
        return NONE

    def struct_member(self, e: ast.FieldAccess, rec: Type) -> Type:
        """A member of a C struct or union (:mod:`pyebpf.lang.records`)."""
        assert rec.struct is not None
        got = rec.struct.member(e.field)
        if got is None:
            self.error(f"Struct/union of type '{rec.struct.name}' does not contain a field "
                       f"named '{e.field}'", e.pos)
            return NONE
        return got.field.type

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
        if "pointer" in (lt.kind, rt.kind):
            return self.pointer_binop(op, lt, rt, at)
        if lt.kind == "int" and rt.kind == "int":
            return result
        if lt.kind != rt.kind:
            self.error(f"Type mismatch for '{op}': comparing '{_tstr(lt)}' with "
                       f"'{_tstr(rt)}'", span, final=True)
        elif op not in ("==", "!="):
            self.error(f"The {op} operator can not be used on expressions of types "
                       f"{_tstr(lt)}, {_tstr(rt)}", at, final=True)
        return result

    def pointer_binop(self, op: str, lt: Type, rt: Type, at: ast.Pos) -> Type:
        """An operation on a pointer, as C (and bpftrace) allow it: ``p + n``,
        ``n + p`` and ``p - n`` are pointers (the code scales ``n`` by the
        pointee's size); a comparison with an integer is an ``int64``, of
        two pointers a ``uint64``; anything else is refused."""
        ptr, other = (lt, rt) if lt.kind == "pointer" else (rt, lt)
        compare = op in ("==", "!=", "<", "<=", ">", ">=")
        if other.kind == "pointer" and compare:
            return U64          # (bpftrace warns of distinct pointee types; not here)
        if other.kind == "int" and (op == "+" or (op == "-" and ptr is lt)):
            return ptr
        if other.kind == "int" and compare:
            return I64
        self.error(f"The {op} operator can not be used on expressions of types "
                   f"{_tstr(lt)}, {_tstr(rt)}", at, final=True)
        return I64

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
        pointer; ``(struct S *)`` a pointer to the kernel's ``struct S``
        (from its BTF; no C headers here)."""
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
        if base.startswith(("struct ", "union ")) and name != base:
            # the script's definition, else the probed program's DWARF, else the kernel's
            rec = self.cdefs.record(base) if self.cdefs.records.defined(base) else None
            found = record_type(rec) if rec is not None else self.program_struct(base)
            if found is None:
                rec = self.cdefs.record(base)
                found = record_type(rec) if rec is not None else None
            if found is not None:
                t = Type("pointer", 8, elem=found)
                return Type("pointer", 8, elem=t) if stars else t
        named = self.cdefs.type_named(base)
        if named is not None and named.kind == "int":
            t = named if name == base else Type("pointer", 8, elem=named)
            return Type("pointer", 8, elem=t) if stars else t
        if base.startswith(("struct ", "union ")) and name == base and \
                self.cdefs.record(base) is not None:
            self.error(f"Cannot cast to struct type \"{base}\"", e.pos)
            return NONE
        self.error(f"Unknown struct/union: '{base}'", e.pos)
        return NONE

    def program_struct(self, name: str) -> Type | None:
        """``struct NAME`` as the probed program's DWARF defines it (a uprobe
        on a program built with ``-g``), else None."""
        find = getattr(self.resolver, "struct_type", None)
        if find is None or self.p is None:
            return None
        for ap in self.p.probe.attach_points:
            got = find(ap, name)
            if got is not None:
                return got  # type: ignore[no-any-return]
        return None

    def sizeof(self, e: ast.Sizeof) -> Type:
        """``sizeof(T)`` or ``sizeof(e)``: a ``uint64``, the size of the named
        type (bpftrace's integers, C's, the script's and the kernel's structs)
        or of the expression's type (a scratch integer: 8)."""
        if e.typename is not None:
            if e.typename in INT_NAMES:
                e.size = INT_NAMES[e.typename][0]
            else:
                named = self.cdefs.type_named(e.typename)
                if named is None:
                    self.error(f"Unknown struct/union: '{e.typename}'", e.pos)
                else:
                    e.size = named.size
        elif isinstance(e.expr, ast.Identifier) and \
                self.cdefs.type_named(e.expr.name) is not None:     # sizeof(uint32_t)
            named = self.cdefs.type_named(e.expr.name)
            e.size = named.size if named is not None else 0
        elif e.expr is not None:
            t = self.expr(e.expr)
            e.size = t.size + t.counted
        return U64
