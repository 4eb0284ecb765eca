"""The checks of calls (part of :mod:`pyebpf.lang.sema`): one function
per bpftrace function, registered by name, each checking the arguments as
bpftrace 0.17 does and giving the call's type; and printf formats
(:func:`printf_specs`, :func:`printf_check`)."""
from __future__ import annotations

from . import ast
from .sema_base import (_KIND_NAMES, _KNOWN_FUNCS, _ONLY_IN, _X86_REGS, STRLEN, U64, USYM,
                        _kind_name, _tstr, signal_number)
from .types import NONE, Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .sema import Analyser

__all__ = ["printf_specs", "printf_check"]


def _nargs(a: Analyser, c: ast.Call, n: int) -> bool:
    """bpftrace's ``check_nargs``."""
    got = len(c.args)
    if got == n:
        return True
    want = "no arguments" if n == 0 else "one argument" if n == 1 else f"{n} arguments"
    a.error(f"{c.name}() requires {want} ({got} provided)", c.pos)
    return False


def _two_strings(a: Analyser, c: ast.Call, n: int) -> bool:
    """``n`` arguments, the first two strings (``strcontains``, ``strncmp``):
    whether the count is right (each wrong argument is reported)."""
    if not _nargs(a, c, n):
        return False
    _arg(a, c, "string", 0)
    _arg(a, c, "string", 1)
    return True


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


def _statement(a: Analyser, c: ast.Call, to: str | None, lo: int, hi: int) -> bool:
    """A call that is a statement (it has no value: not in an assignment or a
    map key) taking ``lo`` to ``hi`` arguments; False when their count is
    wrong (both reported as bpftrace does)."""
    _assignment(a, c, to, None)
    return _varargs(a, c, lo, hi)


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
    # signed, as bpftrace 0.17 types it: `@c + 1` is an int64 in its messages
    return Type("count", 8, True)


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
    data_loc = t.kind == "string" and isinstance(arg, ast.FieldAccess) and \
        isinstance(arg.expr, ast.Builtin) and arg.expr.name == "args"
    if t.kind not in ("int", "pointer", "none") and not data_loc:
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
    t = c.args[0].type or NONE
    if len(c.args) == 1 and t.kind in ("array", "string", "buffer"):
        return Type("buffer", t.size)            # a C array: all of it
    if len(c.args) == 1:
        a.error("buf() expects a length argument for non-array type "
                f"{_kind_name(c.args[0].type)}", c.pos)
    elif _arg(a, c, "int", 1):
        n = a.const_int(c.args[1])
        if n is None:
            # a run-time length: up to BPFTRACE_STRLEN bytes, the length
            # kept with them (printed: that many bytes), as bpftrace 0.17
            return Type("buffer", STRLEN, counted=True)
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


@_call("strerror")
def _strerror(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1):
        _arg(a, c, "int", 0)
    return Type("strerror", 8)


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
    elif t.kind in ("buffer", "string") and t.size == 16:
        return Type("inet", 16)     # an IPv6 address's bytes
    return Type("inet", 24)


@_call("macaddr")
def _macaddr(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """``macaddr(x)``: 6 bytes printed ``05:04:03:02:01:02`` -- of a 6-byte
    array, or read where a pointer points."""
    if _varargs(a, c, 1, 1):
        t = c.args[0].type or NONE
        if t.kind in ("array", "string", "buffer"):
            if t.size != 6:
                a.error("macaddr() argument must be 6 bytes in size", c.pos)
        elif t.kind not in ("int", "pointer", "none"):
            a.error("macaddr() only supports array or pointer arguments", c.pos)
    return Type("macaddr", 6)


@_call("join")
def _join(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _statement(a, c, to, 1, 2):
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


@_call("bswap")
def _bswap(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """bswap(n): the bytes of an integer reversed, unsigned of its size."""
    size = 8
    if _nargs(a, c, 1):
        t = c.args[0].type or NONE
        if t.kind == "int":
            size = t.size
        elif t.kind != "none":
            a.error(f"bswap() only supports integer arguments ({_kind_name(t)} provided)",
                    c.pos)
    return int_type(size, False)


@_call("uptr")
@_call("kptr")
def _addrspace(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """uptr(p)/kptr(p): ``p``, read as a user (kernel) address."""
    if not _nargs(a, c, 1):
        return U64
    t = c.args[0].type or NONE
    if t.kind not in ("int", "pointer", "none"):
        a.error(f"{c.name}() only supports integer or pointer arguments "
                f"({_kind_name(t)} provided)", c.pos)
    return t if t.kind != "none" else U64


@_call("pton")
def _pton(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """pton("addr"): an IPv4 (4 bytes) or IPv6 (16 bytes) address's bytes."""
    if not _nargs(a, c, 1) or not _arg(a, c, "string", 0, literal=True):
        return Type("buffer", 4)
    text = c.args[0].value if isinstance(c.args[0], ast.String) else ""
    data = pton_bytes(text)
    if data is None:
        a.error(f"pton() expects a valid IPv4/IPv6 address, got {text}", c.pos)
        return Type("buffer", 4)
    return Type("buffer", len(data))


def pton_bytes(text: str) -> bytes | None:
    """The bytes of an IPv4 (with a ``.``) or IPv6 (with a ``:``) address, or None."""
    import socket
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    try:
        return socket.inet_pton(family, text)
    except OSError:
        return None


@_call("cgroup_path")
def _cgroup_path(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """cgroup_path(id[, "filter"]): a cgroup id, printed as its paths."""
    flt = "*"
    if _varargs(a, c, 1, 2):
        _arg(a, c, "int", 0)
        if len(c.args) == 2 and _arg(a, c, "string", 1, literal=True) and \
                isinstance(c.args[1], ast.String):
            flt = c.args[1].value
    return Type("cgroup_path", 8, fmt=flt)


@_call("strcontains")
def _strcontains(a: Analyser, c: ast.Call, to: str | None) -> Type:
    """strcontains(haystack, needle): 1 when ``needle`` is in ``haystack``."""
    _two_strings(a, c, 2)
    return U64


def _str_of_param(e: ast.Expr) -> bool:
    """``str($N)``: bpftrace counts it as a string literal (its text is known)."""
    return isinstance(e, ast.Call) and e.name == "str" and len(e.args) == 1 and isinstance(
        e.args[0], ast.PositionalParameter) and not e.args[0].count


@_call("kaddr")
@_call("uaddr")
@_call("cgroupid")
def _addr(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1) and not _str_of_param(c.args[0]):
        _arg(a, c, "string", 0, literal=True)
        if c.name == "uaddr" and a.p is not None and isinstance(c.args[0], ast.String):
            # a pointer to the symbol's own size, as bpftrace 0.17 types it
            size = _user_symbol_size(a.p.probe.attach_points, c.args[0].value)
            elem = int_type(size, True) if size in (1, 2, 4, 8) else U64
            return Type("pointer", 8, elem=elem)
    return U64


def _user_symbol_size(points: list[ast.AttachPoint], name: str) -> int:
    """The size of the data symbol ``name`` in the binary of the first
    uprobe/USDT attach point (0 when it cannot be read here)."""
    import os
    for ap in points:
        if ap.provider in ("uprobe", "uretprobe", "usdt") and ap.parts and \
                os.path.isfile(ap.parts[0]):
            from ..elf import STT_OBJECT, open_elf
            try:
                syms = [s for s in open_elf(ap.parts[0]).find_symbols(name)
                        if s.type == STT_OBJECT]
            except Exception:
                return 0
            return int(syms[0].size) if syms else 0
    return 0


@_call("printf")
@_call("system")
@_call("cat")
def _printf(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if c.name == "system" and not a.unsafe:
        a.error("system() is an unsafe function being used in safe mode", c.pos)
    if not _statement(a, c, to, 1, 128) or not _arg(a, c, "string", 0, literal=True):
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


@_call("print")
def _print(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _statement(a, c, to, 1, 3):
        if isinstance(c.args[0], ast.Map):
            _map_arg(a, c, "print")
            for i in range(1, len(c.args)):     # (top, div)
                _arg(a, c, "int", i, literal=True)
        elif len(c.args) > 1:
            a.error(f"Non-map print() only takes 1 argument, {len(c.args)} found", c.pos)
    return NONE


@_call("time")
def _time(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _statement(a, c, to, 0, 1) and c.args:
        _arg(a, c, "string", 0, literal=True)
    return NONE


@_call("strftime")
def _strftime(a: Analyser, c: ast.Call, to: str | None) -> Type:
    fmt = ""
    if _varargs(a, c, 2, 2):
        if _arg(a, c, "string", 0, literal=True) and isinstance(c.args[0], ast.String):
            fmt = c.args[0].value
        _arg(a, c, "int", 1)
    return Type("timestamp", 16, fmt=fmt)


@_call("strncmp")
def _strncmp(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _two_strings(a, c, 3) and _arg(a, c, "int", 2, literal=True):
        n = a.int_literal(c.args[2])
        if n is None:
            a.error("strncmp: invalid size value", c.pos)
        elif n < 0:
            a.error("Builtin strncmp requires a non-negative size", c.pos)
    return U64


@_call("unwatch")
def _unwatch(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if _nargs(a, c, 1):
        _arg(a, c, "int", 0)
    return NONE


@_call("signal")
def _signal(a: Analyser, c: ast.Call, to: str | None) -> Type:
    if not _statement(a, c, to, 1, 1):
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
_AS_STRING = frozenset({"ksym", "usym", "probe", "username", "strerror", "kstack", "ustack",
                        "pystack", "inet",
                        "timestamp", "macaddr", "cgroup_path"})


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
