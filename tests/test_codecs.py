"""pyebpf.codecs: the one integer type table, the one record layout, codec round trips."""
from __future__ import annotations

import ast
import ctypes
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from budget import fuzz_settings
from hypothesis import given, strategies as st

import pyebpf
from pyebpf import codecs, events, maps
from pyebpf.codecs import (INT_ALIASES, INT_TYPES, UNSIGNED_BY_SIZE, Bytes, BytesCodec,
                           CtypesCodec, StructCodec, c_layout, codec, default_codec,
                           format_fields, int_type, layout_format)
from pyebpf.errors import SizeError

PKG = Path(pyebpf.__file__).parent
NAMES = {"u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"}
#: tables of integer type names that are not the codec table, and why
EXEMPT = {
    # the llvm dialect's cast keywords ("(u32)", "*(s16 *)"): a grammar, which
    # has no s64; owned by pyebpf.text (not moved in issue 13 §4)
    "text/llvm.py",
}


# ------------------------------------------------------------- the one table
def integer_type_tables(tree: ast.AST) -> list[int]:
    """Line numbers of dict literals that table integer type names: three or
    more ``"u8"``..``"s64"`` keys, or width keys ``1, 2, 4, 8`` naming them."""
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        values = [v.value for v in node.values if isinstance(v, ast.Constant)]
        if (len(NAMES.intersection(k for k in keys if isinstance(k, str))) >= 3
                or len(NAMES.intersection(v for v in values if isinstance(v, str))) >= 3
                and set(keys) <= {1, 2, 4, 8}):
            hits.append(node.lineno)
    return hits


def test_the_scan_finds_a_table():
    assert integer_type_tables(ast.parse('T = {"u8": 1, "u16": 2, "u32": 4}')) == [1]
    assert integer_type_tables(ast.parse('T = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}')) == [1]
    assert integer_type_tables(ast.parse('T = {"int": "s64", "char": "s8"}')) == []


def test_integer_type_names_are_tabled_once():
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel == "codecs.py" or rel in EXEMPT:
            continue
        lines = integer_type_tables(ast.parse(path.read_text(), rel))
        if lines:
            found[rel] = lines
    assert found == {}, f"integer type names tabled outside pyebpf/codecs.py: {found}"


def test_the_table_agrees_with_struct():
    assert set(INT_TYPES) == NAMES
    for name, (size, signed, char) in INT_TYPES.items():
        assert struct.calcsize("<" + char) == size and name == f"{'s' if signed else 'u'}{8 * size}"
        assert (struct.unpack("<" + char, b"\xff" * size)[0] < 0) == signed
    assert UNSIGNED_BY_SIZE == {1: "u8", 2: "u16", 4: "u32", 8: "u64"}
    assert INT_ALIASES["i32"] == "s32" and INT_ALIASES["uint64"] == "u64"
    assert INT_ALIASES["int8"] == "s8" and set(INT_ALIASES.values()) <= NAMES
    assert int_type(" U32 ") == (4, False, "I") and int_type("i32") is None
    assert int_type("i32", INT_ALIASES) == (4, True, "i") and int_type("char") is None


def test_every_user_reads_the_table():
    """The spellings each user took before keep their meaning."""
    from pyebpf.probes.sources import _ctype_size
    from pyebpf.program import R1, R10, Program
    from pyebpf.program.output import record_layout
    from pyebpf.session.asmfile import parse_type
    from pyebpf.usdt.provider import ArgType, _arg_type
    for name, letter in (("u8", "b"), ("u16", "h"), ("u32", "w"), ("u64", "dw")):
        by_name, by_letter = Program(), Program()
        by_name.load(R1, R10, -8, name)                  # memory sizes by name
        by_letter.load(R1, R10, -8, letter)
        assert by_name.insns == by_letter.insns
    with pytest.raises(pyebpf.errors.ProgramError):
        Program().load(R1, R10, -8, "s32")               # (signed names are no size there)
    assert record_layout(["u8", "S64", 2]) == record_layout([1, 8, 2])
    assert record_layout(["u8", "s64", "u16"]).format == "<B7xQH6x"
    assert record_layout(["u8", "s64", "u16"]).offsets == (0, 8, 16)
    assert [parse_type(n).code for n in ("u8", "s16", "U32", "s64")] == ["B", "h", "I", "q"]
    assert _ctype_size("__u16") == 2 and _ctype_size("unsigned int") == 4
    assert _ctype_size("s8") == 1 and _ctype_size("long") == 8
    assert _arg_type("uint32") == ArgType("u32", 4, False, ctypes.c_uint32)
    assert _arg_type("int64") == ArgType("s64", 8, True, ctypes.c_int64)
    assert _arg_type("i16") == ArgType("s16", 2, True, ctypes.c_int16)
    assert _arg_type("char") == ArgType("s8", 1, True, ctypes.c_int8)
    assert codec("i64").encode(-1) == b"\xff" * 8 and codec("I8").label == "i8"
    with pytest.raises(SizeError):
        codec("uint32")                       # map specs take struct formats, not C names


# ------------------------------------------------------------ home and purity
def test_codec_names_keep_their_homes():
    for name in ("Codec", "StructCodec", "BytesCodec", "CtypesCodec", "Bytes", "codec"):
        assert getattr(maps, name) is getattr(codecs, name) and name in maps.__all__
    assert maps.PerCpuCodec.__mro__[1] is codecs.Codec
    assert events.StructCodec is codecs.StructCodec


def test_codecs_is_pure():
    """pyebpf.codecs imports nothing of pyebpf above it, nor cffi/ctypes."""
    tree = ast.parse((PKG / "codecs.py").read_text())
    local = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    assert local == {"errors"}
    code = ("import sys, pyebpf.codecs; bad = [m for m in sys.modules if m in ('ctypes', "
            "'cffi', 're') or m.startswith(('pyebpf.kernel', 'pyebpf.maps', 'pyebpf.events'))];"
            " print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ layouts
_INT_CTYPES = {(n, t[0]): getattr(ctypes, f"c_{'' if t[1] else 'u'}int{8 * t[0]}")
               for n, t in INT_TYPES.items()}


@fuzz_settings(300)
@given(st.lists(st.sampled_from(sorted(INT_TYPES)), min_size=1, max_size=12))
def test_layout_is_the_c_compilers(names):
    """record_layout / layout_format / asm-file outputs lay fields out as ctypes (the C ABI) does."""
    from pyebpf.program.output import record_layout
    from pyebpf.session.asmfile import OutputDecl, parse_type

    class S(ctypes.Structure):
        _fields_ = [(f"f{i}", _INT_CTYPES[(n, INT_TYPES[n][0])]) for i, n in enumerate(names)]

    offsets = [getattr(S, f"f{i}").offset for i in range(len(names))]
    fmt, offs, size = layout_format([(INT_TYPES[n][2], INT_TYPES[n][0], INT_TYPES[n][0])
                                     for n in names])
    assert (offs, size) == (offsets, ctypes.sizeof(S)) and struct.calcsize(fmt) == size
    rl = record_layout(names)
    assert list(rl.offsets) == offsets and rl.size == ctypes.sizeof(S)
    assert struct.calcsize(rl.format) == rl.size
    decl = OutputDecl("out", [(f"f{i}", parse_type(n)) for i, n in enumerate(names)])
    assert decl.struct_format() == fmt
    values = [i + 1 for i in range(len(names))]
    assert struct.unpack(fmt, bytes(S(*values))) == tuple(values)


def test_c_layout_rules():
    assert c_layout([]) == ([], 0, 1)
    assert c_layout([(1, 1), (8, 8), (2, 2)]) == ([0, 8, 16], 18, 8)
    assert c_layout([(3, 1), (4, 4)]) == ([0, 4], 8, 4)
    assert layout_format([("4s", 4, 1), ("B", 1, 1), ("I", 4, 4)], ">") == (">4sB3xI", [0, 4, 8], 12)


_CODES = "xcbB?hHiIlLqQnNefdsP"


@st.composite
def struct_formats(draw):
    order = draw(st.sampled_from(["", "@", "=", "<", ">", "!"]))
    codes = _CODES if order in ("", "@") else _CODES.replace("n", "").replace("N", "").replace("P", "")
    items = draw(st.lists(st.tuples(st.sampled_from(["", "0", "1", "2", "3"]), st.sampled_from(codes),
                                    st.sampled_from(["", " "])), min_size=1, max_size=8))
    return order + "".join(c + k + s for c, k, s in items)


@fuzz_settings(500)
@given(struct_formats())
def test_format_fields_match_struct(fmt):
    """Each field format_fields reports is where struct packs it."""
    order, fields, size = format_fields(fmt)
    assert size == struct.calcsize(fmt) and order in "<>="
    values = []
    for i, (code, count, _, isz) in enumerate(fields):
        if code == "s":
            values.append(bytes([65 + i % 26]) * count)
        elif code == "c":
            values.append(bytes([65 + i % 26]))
        elif code == "?":
            values.append(True)
        elif code in "efd":
            values.append(float(i + 1))
        else:
            values.append(i + 1)
    raw = struct.pack(fmt, *values)
    for (code, count, off, isz), v in zip(fields, values):
        item = f"{count}s" if code == "s" else code
        item_order = fmt[0] if fmt[0] in "=<>!" else "@"
        assert struct.unpack_from(item_order + item, raw, off)[0] == v


def test_format_fields_errors():
    with pytest.raises(SizeError, match="pascal"):
        format_fields("<3p")
    with pytest.raises(SizeError):
        format_fields("<Q!")


# ------------------------------------------------------------ codec round trips
@fuzz_settings(300)
@given(st.sampled_from(sorted(INT_TYPES)), st.data())
def test_integer_codecs_round_trip(name, data):
    size, signed, char = INT_TYPES[name]
    lo, hi = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << 8 * size) - 1)
    c = codec(name)
    v = data.draw(st.integers(lo, hi))
    assert c.size == size and c.encode(v) == struct.pack("<" + char, v) and c.decode(c.encode(v)) == v
    bad = data.draw(st.one_of(st.integers(hi + 1, hi + (1 << 70)), st.integers(lo - (1 << 70), lo - 1)))
    with pytest.raises(SizeError, match=name):
        c.encode(bad)
    many = data.draw(st.lists(st.integers(lo, hi), max_size=20))
    buf = bytearray(size * len(many))
    c.pack_many_into(buf, many)
    assert c.unpack_many(buf, len(many)) == many


@fuzz_settings(200)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(-2**15, 2**15 - 1)), max_size=10))
def test_tuple_codec_round_trip(pairs):
    c = codec("<Ih")
    assert isinstance(c, StructCodec) and not c.scalar and c.items == 2
    buf = bytearray(c.size * len(pairs))
    c.pack_many_into(buf, pairs)
    assert c.unpack_many(buf, len(pairs)) == pairs
    assert [c.decode(c.encode(p)) for p in pairs] == pairs


class _Rec(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint8), ("b", ctypes.c_int64)]


@fuzz_settings(200)
@given(st.binary(min_size=1, max_size=64), st.integers(0, 255), st.integers(-2**63, 2**63 - 1))
def test_bytes_and_ctypes_codecs_round_trip(blob, a, b):
    bc = Bytes(len(blob))
    assert isinstance(bc, BytesCodec) and bc.decode(bc.encode(blob)) == blob
    assert bc.unpack_many(blob * 3, 3) == [blob] * 3
    with pytest.raises(SizeError):
        bc.encode(blob + b"x")
    cc = codec(_Rec)
    assert isinstance(cc, CtypesCodec) and cc.size == ctypes.sizeof(_Rec)
    got = cc.decode(cc.encode((a, b)))
    assert (got.a, got.b) == (a, b)
    assert bytes(cc.decode(cc.encode(_Rec(a, b)))) == bytes(_Rec(a, b))


def test_default_codec():
    assert default_codec(4).label == "u32" and default_codec(8).decode(b"\1" + bytes(7)) == 1
    assert isinstance(default_codec(3), BytesCodec) and default_codec(16).size == 16
