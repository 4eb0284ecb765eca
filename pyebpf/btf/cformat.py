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


def _tagged(t: Type, body: str = "") -> str:
    if t.kind == Kind.FWD:
        tag = "union" if t.kind_flag else "struct"
    else:
        tag = {Kind.STRUCT: "struct", Kind.UNION: "union", Kind.ENUM: "enum",
               Kind.ENUM64: "enum"}[t.kind]
    if t.name:
        return f"{tag} {t.name}"
    return f"{tag} {body}" if body else f"{tag} {{...}}"


def declaration(btf: Btf, type_id: int, name: str = "", indent: int = -1) -> str:
    """C for a declaration of ``name`` of type ``type_id`` (without ``;``).

    ``indent`` >= 0 writes the bodies of anonymous structs/unions/enums inline
    at that depth (for definitions); otherwise they show as ``struct {...}``.
    """
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
            decl = f"{decl}({_params(btf, t)})"
            type_id = t.ref
        elif k == Kind.FUNC:
            return declaration(btf, t.ref, name or t.name, indent)
        elif k == Kind.VAR:
            return declaration(btf, t.ref, name or t.name, indent)
        else:
            base = _base(btf, type_id, t, indent)
            if quals:
                base = " ".join(reversed(quals)) + " " + base
            if not decl:
                return base
            return f"{base} {decl}" if not decl.startswith("[") else f"{base} {decl}"
    raise BtfError("type chain longer than 64 (a loop?)", type_id=type_id)


def _params(btf: Btf, proto: Type) -> str:
    if not proto.params:
        return "void"
    out = []
    for p in proto.params:
        out.append("..." if p.type == 0 and not p.name else declaration(btf, p.type, p.name))
    return ", ".join(out)


def _base(btf: Btf, type_id: int, t: Type, indent: int) -> str:
    k = t.kind
    if k == Kind.UNKN:
        return "void"
    if k in (Kind.INT, Kind.FLOAT, Kind.TYPEDEF):
        return t.name
    if k in (Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.FWD):
        if not t.name and indent >= 0 and k != Kind.FWD:
            return _tagged(t) .replace("{...}", "").rstrip() + " " + _body(btf, type_id, indent)
        return _tagged(t)
    if k == Kind.DATASEC:
        return f"SEC(\"{t.name}\")"
    if k == Kind.DECL_TAG:
        return f'__attribute__((btf_decl_tag("{t.name}")))'
    raise BtfError(f"cannot write a {kind_name(k)} as C", type_id=type_id)


def _body(btf: Btf, type_id: int, indent: int) -> str:
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
            text = declaration(btf, m.type, m.name, indent + 1)
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
        head = _tagged(t).replace(" {...}", "")
        return f"{head} {_body(btf, type_id, 0)};"
    if k == Kind.TYPEDEF:
        return f"typedef {declaration(btf, t.ref, t.name, 0)};"
    if k == Kind.FWD:
        return f"{_tagged(t)};"
    if k == Kind.FUNC:
        return f"{declaration(btf, t.ref, t.name)};"
    return f"{declaration(btf, type_id, '', 0)};"
