"""The tree of a bpftrace program: what the parser builds and every later pass
(semantic analysis, code generation, ``--show-program``) walks.

Each node knows where it came from (:class:`Pos`: line and column, 1-based,
and the end column on the same line) so that any pass can point at the
script with a caret, as bpftrace does. Nodes are plain data: the passes keep
what they compute (types, map layouts) in their own tables keyed by node
(nodes hash by identity), or in the ``type`` slot of expressions that the
semantic pass fills in.

The shape follows the language, not bpftrace's C++ classes:

- a :class:`Script` holds :class:`Probe` blocks;
- a probe has one or more :class:`AttachPoint` (``uprobe:/bin/bash:readline``),
  an optional predicate and a :class:`Block` of statements;
- statements: :class:`ExprStmt`, :class:`AssignMap`, :class:`AssignVar`,
  :class:`If`, :class:`Unroll`, :class:`While`, :class:`Jump`;
- expressions: literals, builtins, ``$vars``, ``@maps``, calls, operators,
  casts, field and index access, tuples, positional parameters.

Compound assignments (``@x += 2``, ``$i -= 1``) keep their operator in the
assignment's ``op`` (``None`` for a plain ``=``); ``++``/``--`` are
:class:`Unop` with ``op`` ``"++"``/``"--"`` and ``postfix`` set as written.

A pass dispatches on the kind of a node with one table, the node's class ->
the name of the method that handles it (``ast.NodeVisitor``'s idea, with
the table in sight): ``getattr(self, TABLE[type(node)])(node)``.
"""
from __future__ import annotations

from .._record import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Pos", "Node", "Expr", "Integer", "String", "Builtin", "Identifier",
           "PositionalParameter", "Variable", "Map", "Call", "Binop", "Unop", "Ternary",
           "FieldAccess", "ArrayAccess", "Cast", "Sizeof", "Tuple", "Stmt", "ExprStmt",
           "AssignMap", "AssignVar", "Block", "If", "Unroll", "While", "Jump",
           "AttachPoint", "Probe", "CDefinition", "Script", "BINARY_OPS", "UNARY_OPS", "ASSIGN_OPS"]

#: binary operators, C's set; the parser gives them C's precedence
BINARY_OPS = frozenset({"||", "&&", "|", "^", "&", "==", "!=", "<", "<=", ">", ">=",
                        "<<", ">>", "+", "-", "*", "/", "%"})
#: prefix operators (``++``/``--`` also postfix); ``*`` is a dereference
UNARY_OPS = frozenset({"-", "!", "~", "*", "++", "--"})
#: the operators of compound assignments (``@x <<= 1``)
ASSIGN_OPS = frozenset({"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"})

@dataclass(frozen=True)
class Pos:
    """Where a node starts in the script: ``line`` and ``column`` (1-based),
    and ``end`` the column just past it when it ends on the same line (else
    ``column + 1``); ``end_line`` the line it ends on when that is a later
    one (else 0), so that errors over several lines print as bpftrace's."""
    line: int
    column: int
    end: int = 0
    end_line: int = 0

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


@dataclass(eq=False)
class Node:
    """Any node: its position in the script."""
    pos: Pos


# ---- expressions ----------------------------------------------------------

@dataclass(eq=False)
class Expr(Node):
    """An expression. ``type`` is filled in by the semantic pass (its own
    type objects; ``None`` before it has run)."""
    type: Any = field(default=None, kw_only=True, compare=False)


@dataclass(eq=False)
class Integer(Expr):
    """An integer literal (``42``, ``0x10``, ``1_000``; a negative literal is
    :class:`Unop` ``-`` over it, folded later)."""
    value: int


@dataclass(eq=False)
class String(Expr):
    """A string literal, escapes already decoded (``"a\\n"`` -> ``a`` + newline)."""
    value: str


@dataclass(eq=False)
class Builtin(Expr):
    """A builtin variable: ``pid tid uid gid cpu comm nsecs elapsed cgroup
    retval func probe args cpid ustack kstack`` and ``arg0``..``argN``,
    ``sarg0``.., ``curtask``, ``rand``, ``username``."""
    name: str


@dataclass(eq=False)
class Identifier(Expr):
    """A bare name where the language allows one: a stack mode
    (``ustack(perf)``), a type in ``sizeof``, an enum-like argument, an
    enumerator; ``value``: an enumerator of the script's C definitions, once
    the semantic pass has found it."""
    name: str
    value: int | None = None


@dataclass(eq=False)
class PositionalParameter(Expr):
    """``$1``.. (``index`` >= 1) or ``$#`` (``index`` 0, ``count`` True).
    ``value``: its number, filled in by the semantic pass from the
    parameters the script is compiled with (None outside ``str()`` only
    before that pass has run)."""
    index: int
    count: bool = False
    value: int | None = field(default=None, kw_only=True, compare=False)


@dataclass(eq=False)
class Variable(Expr):
    """A scratch variable, ``$name`` (``name`` without the ``$``)."""
    name: str


@dataclass(eq=False)
class Map(Expr):
    """A map, ``@name`` or ``@name[k1, k2]`` (``name`` without the ``@``,
    ``""`` for the anonymous ``@``); ``keys`` empty when it has none."""
    name: str
    keys: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Call(Expr):
    """A function call, ``name(args...)`` (``printf``, ``count``, ``str``...)."""
    name: str
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Binop(Expr):
    """``left op right``, op one of :data:`BINARY_OPS`."""
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Unop(Expr):
    """``op operand`` (or ``operand op`` when ``postfix``), op one of
    :data:`UNARY_OPS`."""
    op: str
    operand: Expr
    postfix: bool = False


@dataclass(eq=False)
class Ternary(Expr):
    """``cond ? then : else_``."""
    cond: Expr
    then: Expr
    else_: Expr


@dataclass(eq=False)
class FieldAccess(Expr):
    """``expr.field`` or ``expr->field`` (``arrow`` set); ``args.filename``."""
    expr: Expr
    field: str
    arrow: bool = False


@dataclass(eq=False)
class ArrayAccess(Expr):
    """``expr[index]``."""
    expr: Expr
    index: Expr


@dataclass(eq=False)
class Cast(Expr):
    """``(typename) expr``: ``typename`` as written, e.g. ``"uint8"``,
    ``"int64"``, ``"struct task_struct *"``."""
    typename: str
    expr: Expr


@dataclass(eq=False)
class Sizeof(Expr):
    """``sizeof(typename)`` (``typename`` set) or ``sizeof(expr)``;
    ``size``: the value, once the semantic pass has typed what it names."""
    typename: str | None = None
    expr: Expr | None = None
    size: int | None = None


@dataclass(eq=False)
class Tuple(Expr):
    """``(a, b, ...)``: two or more elements."""
    elems: list[Expr] = field(default_factory=list)


# ---- statements -----------------------------------------------------------
# (duplicates: deliberate, one small dataclass per node kind: the fields are the grammar's)

@dataclass(eq=False)
class Stmt(Node):
    """A statement."""


@dataclass(eq=False)
class ExprStmt(Stmt):
    """An expression used as a statement (a call, ``@x++``)."""
    expr: Expr


@dataclass(eq=False)
class AssignMap(Stmt):
    """``@m[k] = value`` (``op`` None) or ``@m[k] op= value``; ``value`` may be
    an aggregation call (``@m[k] = count()``)."""
    map: Map
    value: Expr
    op: str | None = None


@dataclass(eq=False)
class AssignVar(Stmt):
    """``$v = value`` or ``$v op= value``."""
    var: Variable
    value: Expr
    op: str | None = None


@dataclass(eq=False)
class Block(Node):
    """``{ stmt; stmt; ... }``."""
    stmts: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class If(Stmt):
    """``if (cond) { then } else { else_ }`` (``else if`` nests an If in a
    one-statement else block); ``else_`` None without an else."""
    cond: Expr
    then: Block
    else_: Block | None = None


@dataclass(eq=False)
class Unroll(Stmt):
    """``unroll (count) { body }``; ``count`` an integer expression the
    semantic pass requires to be a constant between 1 and 100."""
    count: Expr
    body: Block


@dataclass(eq=False)
class While(Stmt):
    """``while (cond) { body }``."""
    cond: Expr
    body: Block


@dataclass(eq=False)
class Jump(Stmt):
    """``return``, ``break`` or ``continue`` (``kind``)."""
    kind: str


# ---- probes ---------------------------------------------------------------

@dataclass(eq=False)
class AttachPoint(Node):
    """One attach point as written (``raw``) and split: ``provider`` (the
    canonical name: ``uprobe``, ``uretprobe``, ``usdt``, ``tracepoint``,
    ``rawtracepoint``, ``profile``, ``interval``, ``software``,
    ``hardware``, ``kprobe``, ``kretprobe``, ``kfunc``, ``kretfunc``,
    ``BEGIN``, ``END``; short forms such as ``u:``/``t:`` expanded), and
    ``parts`` the colon-separated fields after it (``["/bin/bash",
    "readline"]``; ``["syscalls", "sys_enter_openat"]``; ``["hz", "99"]``).
    ``func_offset``: the ``+off`` of ``uprobe:path:sym+off``, else None.
    ``missing``: set when resolving a uprobe finds no such function -- why
    (bpftrace 0.17 skips it; a script with nothing at all to attach fails)."""
    raw: str
    provider: str
    parts: list[str] = field(default_factory=list)
    func_offset: int | None = None
    missing: str = ""


@dataclass(eq=False)
class Probe(Node):
    """``attach_points /predicate/ { block }``; ``predicate_pos`` spans the
    predicate with its slashes (None without one)."""
    attach_points: list[AttachPoint]
    predicate: Expr | None
    block: Block
    predicate_pos: Pos | None = None


@dataclass(eq=False)
class CDefinition(Node):
    """A C ``struct``/``union``/``enum`` definition written before the
    probes, kept as its text (:mod:`~pyebpf.lang.cdefs` parses it)."""
    text: str


@dataclass(eq=False)
class Script(Node):
    """A whole program: its probes in order, and the source text (for error
    carets and for commenting generated code with the line it comes from);
    the C definitions written before the probes, and the headers it
    ``#include`` s."""
    probes: list[Probe]
    source: str = ""
    filename: str = "<stdin>"
    c_definitions: list[CDefinition] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)

    def line(self, n: int) -> str:
        """Source line ``n`` (1-based), ``""`` past the end."""
        lines = self.source.splitlines()
        return lines[n - 1] if 0 < n <= len(lines) else ""
