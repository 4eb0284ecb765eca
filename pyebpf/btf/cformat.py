"""BTF types written as C: declarations (``struct task_struct *``, ``char
comm[16]``, ``int (*)(void *)``) and definitions in the layout ``bpftool btf
dump ... format c`` uses (tab indentation, anonymous members inline,
bitfields as ``name: bits``).  Padding members and ``packed`` attributes,
which bpftool adds to reproduce a layout, are not written.
"""
from __future__ import annotations

from .errors import BtfError
from .types import Kind, kind_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .reader import Btf
    from .types import Type

__all__ = ["declaration", "definition"]

_QUALS = {Kind.CONST: "const", Kind.VOLATILE: "volatile", Kind.RESTRICT: "restrict"}
_MAX_DEPTH = 64
_MAX_NESTING = 32


def _tag(t: Type) -> str:
    """``struct``, ``union`` or ``enum`` (a FWD: by its kind_flag)."""
    if t.kind == Kind.FWD:
        return "union" if t.kind_flag else "struct"
    return {Kind.STRUCT: "struct", Kind.UNION: "union", Kind.ENUM: "enum",
            Kind.ENUM64: "enum"}[t.kind]


def _tagged(t: Type) -> str:
    return f"{_tag(t)} {t.name}" if t.name else f"{_tag(t)} {{...}}"


def declaration(btf: Btf, type_id: int, name: str = "", indent: int = -1,
                depth: int = 0) -> str:
    """C for a declaration of ``name`` of type ``type_id`` (without ``;``).

    ``indent`` >= 0 writes the bodies of anonymous structs/unions/enums inline
    at that depth (for definitions); otherwise they show as ``struct {...}``.
    ``depth`` counts nested declarations (parameters, members), bounded
    against loops in damaged BTF.
    """
    if depth > _MAX_NESTING:
        raise BtfError(f"anonymous types nested deeper than {_MAX_NESTING} (a loop?)",
                       type_id=type_id)
    decl = name
    quals: list[str] = []
    for _ in range(_MAX_DEPTH):
        t = btf[type_id]
        k = t.kind
        if k in _QUALS or k == Kind.TYPE_TAG:
            quals.append(_QUALS.get(k) or f'__attribute__((btf_type_tag("{t.name}")))')
            type_id = t.ref
        elif k == Kind.PTR:
            q = " ".join(quals)
            decl = "*" + (q + (" " if decl else "") if q else "") + decl
            quals = []
            type_id = t.ref
        elif k == Kind.ARRAY:
            if decl.startswith("*"):
                decl = f"({decl})"
            decl = f"{decl}[{t.nelems}]"
            type_id = t.elem
        elif k == Kind.FUNC_PROTO:
            if decl.startswith("*"):
                decl = f"({decl})"
            decl = f"{decl}({_params(btf, t, depth)})"
            type_id = t.ref
        elif k == Kind.FUNC:
            return declaration(btf, t.ref, name or t.name, indent, depth + 1)
        elif k == Kind.VAR:
            return declaration(btf, t.ref, name or t.name, indent, depth + 1)
        else:
            base = _base(btf, type_id, t, indent, depth)
            if quals:
                base = " ".join(reversed(quals)) + " " + base
            if not decl:
                return base
            return f"{base} {decl}"
    raise BtfError("type chain longer than 64 (a loop?)", type_id=type_id)


def _params(btf: Btf, proto: Type, depth: int) -> str:
    if not proto.params:
        return "void"
    out = []
    for p in proto.params:
        out.append("..." if p.type == 0 and not p.name else
                   declaration(btf, p.type, p.name, -1, depth + 1))
    return ", ".join(out)


def _base(btf: Btf, type_id: int, t: Type, indent: int, depth: int) -> str:
    k = t.kind
    if k == Kind.UNKN:
        return "void"
    if k in (Kind.INT, Kind.FLOAT, Kind.TYPEDEF):
        return t.name
    if k in (Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.FWD):
        if not t.name and indent >= 0 and k != Kind.FWD:
            return f"{_tag(t)} {_body(btf, type_id, indent, depth)}"
        return _tagged(t)
    if k == Kind.DATASEC:
        return f"SEC(\"{t.name}\")"
    if k == Kind.DECL_TAG:
        return f'__attribute__((btf_decl_tag("{t.name}")))'
    raise BtfError(f"cannot write a {kind_name(k)} as C", type_id=type_id)


def _body(btf: Btf, type_id: int, indent: int, depth: int = 0) -> str:
    """``{ ... }`` of a struct, union or enum, its members at ``indent + 1`` tabs."""
    t = btf[type_id]
    tabs = "\t" * (indent + 1)
    lines = ["{"]
    if t.is_enum:
        for v in t.values:
            value = v.value
            suffix = "ULL" if t.kind == Kind.ENUM64 and value >= 1 << 63 else \
                ("LL" if t.kind == Kind.ENUM64 and (value < -(1 << 31) or value >= 1 << 32) else "")
            lines.append(f"{tabs}{v.name} = {value}{suffix},")
    else:
        for m in t.members:
            text = declaration(btf, m.type, m.name, indent + 1, depth + 1)
            if m.bitfield_size:
                text += f": {m.bitfield_size}"
            lines.append(f"{tabs}{text};")
    lines.append("\t" * indent + "}")
    return "\n".join(lines)


def definition(btf: Btf, type_id: int) -> str:
    """The C definition of a named type (struct, union, enum, typedef, function,
    variable) ending in ``;``."""
    t = btf[type_id]
    k = t.kind
    if k in (Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64):
        head = f"{_tag(t)} {t.name}" if t.name else _tag(t)
        return f"{head} {_body(btf, type_id, 0)};"
    if k == Kind.TYPEDEF:
        return f"typedef {declaration(btf, t.ref, t.name, 0)};"
    if k == Kind.FWD:
        return f"{_tagged(t)};"
    if k == Kind.FUNC:
        return f"{declaration(btf, t.ref, t.name)};"
    return f"{declaration(btf, type_id, '', 0)};"
