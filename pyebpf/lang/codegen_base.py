"""The code generator's common ground (:mod:`pyebpf.lang.codegen`): its
error, the types of expressions, constant folding, and the base of the
per-probe generator -- its state, the register pool, stack zeroing, and
what the parts need of each other (the statements, maps, calls, values
and integers of :mod:`~pyebpf.lang.codegen_control`,
:mod:`~pyebpf.lang.codegen_maps`, :mod:`~pyebpf.lang.codegen_calls`,
:mod:`~pyebpf.lang.codegen_values` and :mod:`~pyebpf.lang.codegen_ints`)."""
from __future__ import annotations

from ..errors import ProgramError
from ..program import R1, R6, R7, R8, R9, R10, Program, Reg
from . import ast as A
from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from .codegen import Action, MapPlan, _Context
    from .codegen_control import _Loop

#: join(): how many strings, of how many bytes (bpftrace 0.17's defaults)
JOIN_ARGS = 16
JOIN_STRLEN = 1024
U64 = int_type(8, False)
I64 = int_type(8, True)

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
        if e.name in ("ustack", "kstack", "pystack"):
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
    if isinstance(e, A.PositionalParameter) and e.value is not None:
        return e.value                   # (read by the semantic pass)
    if isinstance(e, A.Sizeof):
        return e.size
    if isinstance(e, A.Identifier) and e.value is not None:
        return e.value                   # an enumerator of the script's
    if isinstance(e, A.Identifier) and type_of(e).kind == "int":
        from .btftypes import enum_value
        return enum_value(e.name)        # a kernel enumerator
    if isinstance(e, A.Unop) and e.op == "-" and not e.postfix:
        v = _const(e.operand)
        return None if v is None else -v
    return None


def pointee_size(t: Type) -> int:
    """The size of what pointer type ``t`` points to: the step of ``p + 1``
    and ``p[1]`` (1 for an unknown pointee)."""
    return max(t.elem.size, 1) if t.elem is not None else 1


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v

def _stored_value_type(t: Type) -> Type:
    """How a plain map value is stored: integers as 8 bytes."""
    if t.kind == "int":
        return int_type(8, t.signed)
    return t


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


class _GenBase:
    """The state of one probe's generator and the helpers every part uses;
    the parts' methods one part calls in another are declared here."""

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

    def _comment_line(self, pos: A.Pos, extra: str | None = None) -> None:
        if pos.line == self.last_line and extra is None:
            return
        self.last_line = pos.line
        text = self.script.line(pos.line).strip()
        head = f"{self.script.filename}:{pos.line}: {text}"
        self.p.comment(head if extra is None else f"{extra} -- {head}")

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

    _CMP = {"==": ("jeq", "jeq"), "!=": ("jne", "jne"), "<": ("jlt", "jslt"),
            "<=": ("jle", "jsle"), ">": ("jgt", "jsgt"), ">=": ("jge", "jsge")}

    def _zero(self, off: int, n: int) -> None:
        pos = 0
        while pos < n:
            w = _width(0, off + pos, n - pos)
            self.p.store(R10, off + pos, 0, w)
            pos += w

    def _is_args(self, e: A.Expr) -> bool:
        return isinstance(e, A.Builtin) and e.name == "args"

    def _need_source(self, e: A.Expr, method: str) -> Any:
        fn = getattr(self.source, method, None) if self.source is not None else None
        if fn is None:
            what = self.kind if self.source is None else self.name
            raise CodegenError(f"{_describe(e)} is not available in {what}", e.pos)
        return self.source

    def _user_space(self) -> bool:
        """True at a uprobe/uretprobe/USDT probe (its pointers are user memory)."""
        name = type(self.source).__name__.lower() if self.source is not None else ""
        return "uprobe" in name or "usdt" in name

    def _no_space(self) -> bool:
        """True at a probe whose pointers have no address space in bpftrace
        0.17 (BEGIN/END, profile, interval, software, hardware, watchpoints):
        it reads them with the legacy ``probe_read``, which reads user or
        kernel memory as the address is."""
        return self.source is None or \
            type(self.source).__name__ in ("PerfEventSource", "WatchpointSource")

    def unit_prog_is_raw(self) -> bool:
        """True when the context is not a ``pt_regs`` (tracepoints, perf events)."""
        from ..kernel.constants import ProgType
        return int(self.source.prog_type) != int(ProgType.KPROBE)

    if TYPE_CHECKING:     # the parts' methods the others call
        def jump_if_false(self, e: A.Expr, target: str) -> None: ...
        def _operands(self, e: A.Binop) -> tuple[Reg, Reg | int, bool]: ...
        def expr_stmt(self, e: A.Expr) -> None: ...
        def assign_map(self, s: A.AssignMap) -> None: ...
        def plan(self, m: A.Map) -> MapPlan: ...
        def key(self, m: A.Map, plan: MapPlan, extra: int = 0) -> int: ...
        def map_read(self, m: A.Map, dst: Reg, pos: A.Pos | None = None) -> None: ...
        def map_incdec(self, e: A.Unop, dst: Reg) -> None: ...
        def output(self, action: Action, args: Sequence[A.Expr]) -> None: ...
        def check_helper(self, helper: str, pos: A.Pos, level: int = 1, *,
                         null: bool = False) -> None: ...
        def value_into(self, e: A.Expr, off: int, t: Type) -> None: ...
        def string_into(self, e: A.Expr, off: int, size: int) -> None: ...
        def param_text(self, e: A.Call) -> str | None: ...
        def int_expr(self, e: A.Expr) -> Reg: ...
        def _load_const(self, r: Reg, v: int) -> None: ...
        def located(self, e: A.Expr) -> bool: ...
        def element_read(self, e: A.Expr) -> Reg: ...
        def record_into(self, e: A.Expr, off: int, t: Type) -> None: ...
        def location(self, e: A.Expr) -> Any: ...
        def fetch(self, loc: Any, dst: int, n: int, *, keep: bool = False,
                  pos: A.Pos | None = None) -> None: ...
        def compare_bytes(self, a: A.Expr, b: A.Expr, dst: Reg, negate: bool) -> None: ...
        def copy_stack(self, dst: int, src: int, n: int, dst_size: int) -> None: ...
        def copy_bytes(self, base: Reg, src: int, dst: int, n: int) -> None: ...
        def map_bytes_into(self, m: A.Map, off: int, size: int) -> None: ...
        def _read_helper(self, e: A.Expr) -> str: ...
        def bytes_source(self, e: A.Expr, size: int) -> int: ...
        def element_source(self, e: A.FieldAccess) -> int: ...
