"""The C definitions pass: a script's ``struct``/``union``/``enum``
definitions, parsed with pycparser (a C parser in pure Python, which cffi
already brings) and laid out into :class:`~pyebpf.lang.records.Record` s,
as bpftrace 0.17 hands them to clang.

:func:`definitions` reads every :class:`~pyebpf.lang.ast.CDefinition` of a
script into one :class:`CDefinitions` -- the records (the script's own
first, then the kernel's BTF for the names it does not define), the
enumerators, and the C type names -- which the semantic pass reads.

What it accepts is what bpftrace's tests write: members of the C integer
types and of the ``<stdint.h>`` and kernel (``u32``, ``__u64``) names,
pointers (to records, integers, functions), arrays (``char[N]`` is a
string, as bpftrace types it; others arrays, of any dimension), bit fields,
nested and anonymous structs and unions, enums, and members whose struct
is a kernel one (found in the BTF). A missing ``;`` before a ``}`` is
forgiven, as clang forgives it. No preprocessor runs: comments are
removed, ``__attribute__`` is dropped.

Errors are clang's words where bpftrace shows clang's (``field has
incomplete type 'struct x'``), at the definition's line in the script.
"""
from __future__ import annotations

from ..codecs import INT_TYPES
from . import ast
from .errors import LangError
from .records import CField, Record, Records, layout
from .types import Type, array_type, int_type, record_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CDefinitions", "definitions", "C_INT_NAMES", "CDefinitionError"]

#: C's integer type names and the usual typedefs -> (size, signed): the
#: fixed-width ones (``u32``, ``__s64``, ``uint8_t``) derived from the one
#: table of integer types (:data:`pyebpf.codecs.INT_TYPES`)
C_INT_NAMES = {
    "char": (1, True), "signed char": (1, True), "unsigned char": (1, False),
    "short": (2, True), "unsigned short": (2, False), "int": (4, True),
    "unsigned int": (4, False), "long": (8, True), "unsigned long": (8, False),
    "long long": (8, True), "unsigned long long": (8, False), "_Bool": (1, False),
    "float": (4, True), "double": (8, True), "long double": (16, True),
    **{f"{prefix}{name}": (size, signed) for name, (size, signed, _) in INT_TYPES.items()
       for prefix in ("", "__")},
    **{f"{'' if signed else 'u'}int{8 * size}_t": (size, signed)
       for size, signed, _ in INT_TYPES.values()},
    **{f"__{order}{8 * size}": (size, False) for size, signed, _ in INT_TYPES.values()
       if size > 1 and not signed for order in ("be", "le")},
    "size_t": (8, False), "ssize_t": (8, True), "uintptr_t": (8, False), "intptr_t": (8, True),
    "pid_t": (4, True), "uid_t": (4, False), "gid_t": (4, False), "off_t": (8, True),
    "bool": (1, False),
}
#: the typedef names above that are not C keywords (declared before parsing)
_TYPEDEFS = [n for n in C_INT_NAMES if " " not in n and n not in (
    "char", "short", "int", "long", "_Bool", "float", "double")]


class CDefinitionError(LangError):
    """A C definition of the script is not valid C, or uses a type nobody
    defines; its text is as bpftrace shows clang's (``FILE:L:C: error: ...``)."""

    def __init__(self, message: str, line: int, column: int, filename: str) -> None:
        super().__init__(message, ast.Pos(line, column, column + 1), filename=filename)
        self.args = (f"{filename}:{line}:{column}: error: {message}",)

    def __str__(self) -> str:
        return str(self.args[0])


class CDefinitions:
    """What a script's C definitions define: ``records`` (by name, the
    kernel's BTF behind them), ``enums`` (enumerator -> value) and
    ``enum_types`` (``enum X`` -> its integer type)."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self.enums: dict[str, int] = {}
        self.enum_types: dict[str, Type] = {}

    def record(self, name: str) -> Record | None:
        """``struct X``/``union X``: the script's definition, else the kernel's."""
        return self.records.get(name)

    def type_named(self, name: str) -> Type | None:
        """The type a cast or ``sizeof`` names (``struct Foo``, ``enum E``,
        ``uint32_t``, ``unsigned int``), None when unknown."""
        name = " ".join(name.split())
        if name.startswith(("struct ", "union ")):
            rec = self.records.get(name)
            return None if rec is None else record_type(rec)
        if name.startswith("enum "):
            return self.enum_types.get(name)
        if name in C_INT_NAMES:
            size, signed = C_INT_NAMES[name]
            return int_type(size, signed)
        return None


def _kernel_record(name: str) -> Record | None:
    from .btftypes import record
    return record(name)


def definitions(script: ast.Script) -> CDefinitions:
    """Parse and lay out the C definitions of ``script`` (raises
    :class:`CDefinitionError` for a bad one)."""
    out = CDefinitions(Records(_kernel_record))
    if not script.c_definitions:
        return out
    import re          # (here: a script without C definitions does not pay for it)
    redefines_kernel = False
    for d in script.c_definitions:
        m = re.match(r"\s*(struct|union)\s+(\w+)", d.text)
        if m and _kernel_record(f"{m.group(1)} {m.group(2)}") is not None:
            redefines_kernel = True
    # a script that redefines a kernel struct gets no kernel types for the
    # members of its own (bpftrace then has no BTF definitions to add)
    _Builder(out, script.filename, kernel=not redefines_kernel).parse(script.c_definitions)
    return out


def _clean(text: str) -> str:
    """Comments and ``__attribute__`` out (newlines kept), a ``;`` where
    clang would forgive its absence (before ``}``, after the last ``}``)."""
    import re
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", "", text)
    text = _close_members(text)
    text = text.rstrip()
    if not text.endswith(";"):
        text += ";"
    return text


def _close_members(text: str) -> str:
    """A ``;`` after the last member of a struct or union body that lacks
    one (not in an enum's body, where ``,`` separates)."""
    out: list[str] = []
    opened: list[bool] = []          # per open brace: an enum's body?
    for i, c in enumerate(text):
        if c == "{":
            before = "".join(out).rstrip()
            words = before.replace("{", " ").replace("}", " ").replace(";", " ").split()
            opened.append(len(words) >= 1 and (words[-1] == "enum" or
                                               (len(words) >= 2 and words[-2] == "enum")))
        elif c == "}":
            is_enum = opened.pop() if opened else False
            body = "".join(out).rstrip()
            if not is_enum and body and body[-1] not in ";{}":
                out.append(";")
        out.append(c)
    return "".join(out)


class _Builder:
    """Turns pycparser's declarations into records and types."""

    def __init__(self, out: CDefinitions, filename: str, kernel: bool) -> None:
        self.out = out
        self.filename = filename
        self.kernel = kernel
        self.pos = (1, 1)
        self.anon = 0
        #: records named before their definition (``struct s *next``), filled in then
        self.forward: dict[str, Record] = {}

    def error(self, message: str, coord: Any = None) -> CDefinitionError:
        line, col = self.pos
        if coord is not None and getattr(coord, "line", 0) > 0:
            line, col = coord.line, coord.column or 1
        return CDefinitionError(message, line, col, self.filename)

    def parse(self, defs: list[ast.CDefinition]) -> None:
        """Parse every definition (one pycparser run: each placed at its
        line and column of the script) and define what they define."""
        from pycparser import c_parser
        from pycparser.c_parser import ParseError
        import re
        self.pos = (defs[0].pos.line, defs[0].pos.column)
        words = set(re.findall(r"\w+", " ".join(d.text for d in defs)))
        used = [n for n in _TYPEDEFS if n in words]    # (each typedef parsed costs)
        prelude = "".join(f"typedef int {n};\n" for n in used)
        src = prelude + "".join(f"# {d.pos.line} \"{self.filename}\"\n"
                                 f"{' ' * (d.pos.column - 1)}{_clean(d.text)}\n" for d in defs)
        try:
            tree = c_parser.CParser().parse(src, self.filename)
        except ParseError as exc:
            m = re.match(r"[^:]*:(\d+):(\d+): (.*)", str(exc))
            if m:
                what = m.group(3)
                if "Invalid specifier list" in what:
                    what = "unknown type name in a declaration"
                if what.startswith("before: "):
                    what = f"syntax error before '{what[8:]}'"
                raise CDefinitionError(what, int(m.group(1)), int(m.group(2)),
                                       self.filename) from None
            what = str(exc)
            if "Invalid specifier list" in what:
                what = "unknown type name in a declaration"
            raise self.error(what) from None
        for node in tree.ext[len(used):]:
            self.top(node)

    def top(self, node: Any) -> None:
        from pycparser import c_ast
        t = node.type
        if isinstance(node, c_ast.Typedef):
            raise self.error("typedefs are not supported in definitions", node.coord)
        if isinstance(t, (c_ast.Struct, c_ast.Union)):
            self.composite(t)
        elif isinstance(t, c_ast.Enum):
            self.enum(t)
        else:
            raise self.error("only struct, union and enum definitions may be written here",
                             node.coord)

    # ---------------------------------------------------------------- types
    def composite(self, node: Any) -> Record:
        """The record of a ``struct``/``union`` node (defined when it has a body)."""
        from pycparser import c_ast
        word = "union" if isinstance(node, c_ast.Union) else "struct"
        if node.name is None:
            self.anon += 1
            name = f"{word} (anonymous {self.anon})"
        else:
            name = f"{word} {node.name}"
        if node.decls is None:           # a use: struct X
            rec = self.forward.get(name)
            if rec is None and (self.kernel or self.out.records.defined(name)):
                rec = self.out.records.get(name)
            if rec is None:              # incomplete until defined (if ever)
                rec = self.forward[name] = Record(name, 0, 0, ())
            return rec
        rec = self.forward.setdefault(name, Record(name, 0, 0, ()))
        members = [self.member(decl) for decl in node.decls]
        done = layout(name, members)
        rec.size, rec.align, rec._fields = done.size, done.align, done.fields
        del self.forward[name]
        self.out.records.define(rec)
        return rec

    def enum(self, node: Any) -> Type:
        """An ``enum``: its enumerators become constants; an ``unsigned
        int`` (an ``int`` when one is negative)."""
        name = f"enum {node.name}" if node.name else "enum"
        if node.values is None:
            t = self.out.enum_types.get(name)
            if t is None:
                raise self.error(f"incomplete type '{name}'", node.coord)
            return t
        value = 0
        negative = False
        for e in node.values.enumerators:
            if e.value is not None:
                value = self.constant(e.value)
            self.out.enums[e.name] = value
            negative = negative or value < 0
            value += 1
        t = int_type(4, negative)
        if node.name:
            self.out.enum_types[name] = t
        return t

    def member(self, decl: Any) -> CField:
        """One member, before layout."""
        bits = self.constant(decl.bitsize) if decl.bitsize is not None else None
        t, size, align = self.ctype(decl.type)
        if size == 0 and t.kind == "record":
            raise self.error(f"field has incomplete type '{t.struct.name if t.struct else t}'",
                             decl.coord)
        return CField(decl.name or "", t, size, align, bits)

    def ctype(self, node: Any) -> tuple[Type, int, int]:
        """``(type, size, alignment)`` of a declarator's type."""
        from pycparser import c_ast
        if isinstance(node, c_ast.TypeDecl):
            return self.base(node.type)
        if isinstance(node, (c_ast.Struct, c_ast.Union)):      # an anonymous member
            return self.base(node)
        if isinstance(node, c_ast.PtrDecl):
            inner = node.type
            if isinstance(inner, c_ast.FuncDecl):
                return Type("pointer", 8, elem=int_type(8, False)), 8, 8
            try:
                target, _, _ = self.ctype(inner)
            except CDefinitionError:
                target = int_type(8, False)
            if target.kind == "none":        # void *
                target = int_type(8, False)
            return Type("pointer", 8, elem=target), 8, 8
        if isinstance(node, c_ast.ArrayDecl):
            n = self.constant(node.dim) if node.dim is not None else 0
            elem, size, align = self.ctype(node.type)
            if elem.kind == "int" and size == 1 and self._plain_char(node.type):
                return string_type(n), n, 1
            return array_type(elem, n), size * n, align
        raise self.error("unsupported declaration", getattr(node, "coord", None))

    @staticmethod
    def _plain_char(node: Any) -> bool:
        from pycparser import c_ast
        return (isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType)
                and node.type.names == ["char"])

    def base(self, node: Any) -> tuple[Type, int, int]:
        from pycparser import c_ast
        if isinstance(node, c_ast.IdentifierType):
            names = [n for n in node.names if n not in ("signed",)] or ["int"]
            if node.names == ["signed", "char"]:
                names = ["signed", "char"]
            name = " ".join(names)
            if name == "void":
                return Type("none"), 0, 1
            name = {"unsigned": "unsigned int", "short int": "short", "long int": "long",
                    "unsigned short int": "unsigned short", "unsigned long int": "unsigned long",
                    "long long int": "long long", "unsigned long long int":
                    "unsigned long long", "unsigned char": "unsigned char",
                    "signed char": "signed char"}.get(name, name)
            got = C_INT_NAMES.get(name)
            if got is None:
                raise self.error(f"unknown type name '{name}'", node.coord)
            size, signed = got
            return int_type(min(size, 8), signed), size, min(size, 16)
        if isinstance(node, (c_ast.Struct, c_ast.Union)):
            rec = self.composite(node)
            return record_type(rec), rec.size, max(rec.align, 1)
        if isinstance(node, c_ast.Enum):
            t = self.enum(node)
            return t, 4, 4
        raise self.error("unsupported type", getattr(node, "coord", None))

    def constant(self, node: Any) -> int:
        """The value of a constant expression (literals, enumerators, ``+ - * / << >> | & ~``)."""
        from pycparser import c_ast
        if isinstance(node, c_ast.Constant):
            text = node.value.rstrip("uUlL")
            if node.type == "char":
                return ord(node.value.strip("'")[:1] or "\0")
            return int(text, 0) if not (text.startswith("0") and text[1:].isdigit()) \
                else int(text, 8)
        if isinstance(node, c_ast.ID) and node.name in self.out.enums:
            return self.out.enums[node.name]
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "~", "+"):
            v = self.constant(node.expr)
            return -v if node.op == "-" else ~v if node.op == "~" else v
        if isinstance(node, c_ast.BinaryOp):
            a, b = self.constant(node.left), self.constant(node.right)
            ops = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0,
                   ">>": a >> b if b >= 0 else 0, "|": a | b, "&": a & b, "^": a ^ b}
            if node.op in ("/", "%") and b:
                return a // b if node.op == "/" else a % b
            if node.op in ops:
                return ops[node.op]
        raise self.error("expression is not an integer constant expression",
                         getattr(node, "coord", None))


