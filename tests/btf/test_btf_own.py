"""pyebpf.btf.own without the kernel: the types it writes for codecs, the
func_info/line_info it writes for programs, the bytes equal BtfBuilder's,
and it stays off the heavy BTF modules (it is on every map creation)."""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.btf import Btf, BtfBuilder, Kind
from pyebpf.btf.own import OwnBtf, SourceLines, map_btf, parse_origin, program_btf
from pyebpf.codecs import Bytes, codec, format_fields
from pyebpf.isa import Insn
from pyebpf.program import R0, R1, R6, Program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.abspath(__file__)


class Rec(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("flags", ctypes.c_uint32, 3),
                ("level", ctypes.c_uint32, 5), ("comm", ctypes.c_char * 16),
                ("lat", ctypes.c_double), ("hist", ctypes.c_uint16 * 3), ("ok", ctypes.c_bool)]


class Either(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("b", ctypes.c_uint8 * 8)]


class Outer(ctypes.Structure):
    _fields_ = [("rec", Rec), ("u", Either), ("p", ctypes.c_void_p)]


class BigEndian(ctypes.BigEndianStructure):
    _fields_ = [("x", ctypes.c_uint32)]


def _types(blob: bytes) -> Btf:
    return Btf(blob)


def _member_names(btf: Btf, tid: int) -> list[tuple[str, int, int]]:
    return [(m.name, m.bit_offset, m.bitfield_size) for m in btf[tid].members]


# --------------------------------------------------------------------- maps
@pytest.mark.parametrize("spec, kind, name, signed", [
    ("u8", Kind.INT, "u8", False), ("u16", Kind.INT, "u16", False),
    ("u32", Kind.INT, "u32", False), ("u64", Kind.INT, "u64", False),
    ("s8", Kind.INT, "s8", True), ("s64", Kind.INT, "s64", True), (4, Kind.INT, "u32", False),
    ("<i", Kind.INT, "s32", True), ("d", Kind.FLOAT, "double", False),
    ("f", Kind.FLOAT, "float", False), ("?", Kind.INT, "bool", False),
    (ctypes.c_int16, Kind.INT, "s16", True), (ctypes.c_uint64, Kind.INT, "u64", False)])
def test_scalars(spec, kind, name, signed):
    c = codec(spec)
    blob, kid, vid = map_btf(codec("u32"), c)
    btf = _types(blob)
    t = btf[vid]
    assert (t.kind, t.name, btf.size_of(vid)) == (kind, name, c.size)
    if kind == Kind.INT and name != "bool":
        assert bool(t.encoding & 1) == signed
    assert btf[kid].name == "u32"


def test_bytes_and_strings_are_char_arrays():
    blob, kid, vid = map_btf(codec(Bytes(16)), codec("<I8s"))
    btf = _types(blob)
    assert btf.format(kid) == "char [16]"
    assert _member_names(btf, vid) == [("f0", 0, 0), ("f1", 32, 0)]
    assert btf.format(btf[vid].members[1].type) == "char [8]"
    assert btf.size_of(vid) == 12


def test_one_string_is_the_array_itself():
    blob, _, vid = map_btf(None, codec("16s"))
    assert _types(blob).format(vid) == "char [16]"
    blob, _, vid = map_btf(None, codec("<I4x"))          # one field and padding: a struct
    assert _types(blob)[vid].kind == Kind.STRUCT and _types(blob).size_of(vid) == 8


def test_struct_formats_keep_c_padding():
    c = codec("@BQ")                      # native: 7 bytes of padding after the u8
    blob, _, vid = map_btf(None, c)
    btf = _types(blob)
    assert _member_names(btf, vid) == [("f0", 0, 0), ("f1", 64, 0)]
    assert btf.size_of(vid) == c.size == 16


def test_ctypes_records_keep_names_bitfields_nesting():
    blob, _, vid = map_btf(codec("u32"), codec(Outer))
    btf = _types(blob)
    assert btf[vid].name == "Outer" and btf.size_of(vid) == ctypes.sizeof(Outer)
    rec = btf[vid].members[0].type
    assert btf[rec].kind_flag
    assert _member_names(btf, rec) == [
        ("pid", 0, 0), ("flags", 32, 3), ("level", 35, 5), ("comm", 64, 0), ("lat", 192, 0),
        ("hist", 256, 0), ("ok", 304, 0)]
    assert btf.format(btf[rec].members[3].type) == "char [16]"
    assert btf.format(btf[rec].members[5].type) == "u16 [3]"
    u = btf[vid].members[1].type
    assert btf[u].kind == Kind.UNION and _member_names(btf, u) == [("i", 0, 0), ("b", 0, 0)]
    assert btf[btf[vid].members[2].type].name == "u64"          # a pointer: its value


def test_per_cpu_values_are_typed_per_cpu():
    from pyebpf.maps import PerCpuCodec
    blob, _, vid = map_btf(codec("u32"), PerCpuCodec(codec("u64"), 2))
    assert _types(blob)[vid].name == "u64"


def test_what_btf_cannot_say_is_bytes():
    blob, kid, vid = map_btf(codec("u32"), codec(BigEndian))
    btf = _types(blob)
    assert btf.format(vid) == "u8 [4]"
    blob, _, vid = map_btf(None, codec(">IQ"))
    assert _types(blob).format(vid) == "u8 [12]"


def test_blobs_are_cached_by_layout():
    a = map_btf(codec("u32"), codec("<QI"))
    assert map_btf(codec("u32"), codec("<QI")) is a
    assert map_btf(codec("u64"), codec("<QI")) is not a


_CODES = st.sampled_from(list("bBhHiIlLqQ?cfd") + ["4s", "3s", "x", "2x"])


@fuzz_settings(200)
@given(st.lists(_CODES, min_size=1, max_size=8), st.sampled_from("<=@"))
def test_any_struct_format_is_typed_to_its_layout(codes, order):
    fmt = order + "".join(codes)
    if struct.calcsize(fmt) == 0:
        return
    c = codec(fmt)
    blob, _, vid = map_btf(None, c)
    btf = _types(blob)
    assert btf.size_of(vid) == c.size
    _, fields, _ = format_fields(fmt)
    if btf[vid].kind == Kind.STRUCT and btf[vid].name == "" and btf[vid].members and \
            btf[vid].members[0].name == "f0":
        assert [m.bit_offset for m in btf[vid].members] == [8 * f[2] for f in fields]


# -------------------------------------------------------- the bytes themselves
def test_the_bytes_equal_btfbuilders():
    own = OwnBtf()
    u32 = own.integer(4, False)
    ch = own.char()
    arr = own.array(ch, 16)
    dbl = own.float_(8)
    st_ = own.struct_("rec", 32, [("a", u32, 0, 0), ("b", u32, 32, 3), ("name", arr, 64, 0),
                                  ("d", dbl, 192, 0)])
    un = own.struct_("", 8, [("x", u32, 0, 0)], union=True)
    proto = own.func_proto(own.int_("int", 4, 1), (("p", u32),))
    own.func("main", proto, 1)

    b = BtfBuilder()
    assert b.add_int("u32", 4) == u32
    assert b.add_int("char", 1, char=True) == ch
    assert b.add_array(ch, 16, index=u32) == arr
    assert b.add_float("double", 8) == dbl
    assert b.add_struct("rec", 32, [("a", u32, 0), ("b", u32, 32, 3), ("name", arr, 64),
                                    ("d", dbl, 192)]) == st_
    assert b.add_union("", 8, [("x", u32, 0)]) == un
    intid = b.add_int("int", 4, signed=True)
    assert b.add_func_proto(intid, [("p", u32)]) == proto
    b.add_func("main", proto, 1)
    assert own.build() == b.build()


def test_identical_types_are_written_once():
    own = OwnBtf()
    assert own.integer(4, False) == own.integer(4, False) == own.int_("u32", 4)
    assert own.array(own.char(), 4) == own.array(own.char(), 4)
    assert own.count == 3


# ------------------------------------------------------------------ programs
def _program() -> Program:
    p = Program("my-prog")
    p.mov(R6, R1)
    p.call_local("helper")
    p.lddw(R1, 1 << 40); p.add(R0, 1)   # noqa: E702 - two instructions, one line
    p.exit()
    sub = p.subprogram("helper")
    sub.mov(R0, 41)
    sub.exit()
    return p


def _records(info: bytes, size: int) -> list[tuple[int, ...]]:
    fmt = "<II" if size == 8 else "<IIII"
    return [struct.unpack_from(fmt, info, i) for i in range(0, len(info), size)]


def test_program_functions_and_lines():
    p = _program()
    insns = p.finalize()
    own = program_btf(insns, p.name, p)
    assert own is not None
    btf = _types(own.blob)
    funcs = _records(own.func_info, 8)
    # main at 0, helper after 2 + ld_imm64 (2 slots) + 2 = slot 6
    assert [f[0] for f in funcs] == [0, 6]
    assert [btf[f[1]].name for f in funcs] == ["my_prog", "helper"]
    assert [btf[f[1]].linkage for f in funcs] == [1, 0]          # main global, subprogram static
    assert btf.format(btf[funcs[0][1]].ref) == "int (void)"
    lines = _records(own.line_info, 16)
    # one record per source line: the ld_imm64 and add share one; slot 3 (its 2nd half) has none
    assert [r[0] for r in lines] == [0, 1, 2, 5, 6, 7]
    first = insns[0].origin.rpartition(":")
    assert btf.string(lines[0][1]) == HERE == first[0]
    assert lines[0][3] >> 10 == int(first[2])
    assert btf.string(lines[0][2]).strip() == "p.mov(R6, R1)"
    assert btf.string(lines[2][2]).strip().startswith("p.lddw(R1, 1 << 40); p.add(R0, 1)")
    assert lines[0][3] & 0x3FF == 5                      # the column: the indentation + 1
    assert [(s, f) for s, f, _, _ in own.lines][:2] == [(0, HERE), (1, HERE)]


def test_a_subprogram_start_always_has_a_line():
    p = Program("x")
    p.call_local("f"); p.exit(); sub = p.subprogram("f"); sub.mov(R0, 0); sub.exit()  # noqa: E702
    own = program_btf(p.finalize(), "x", p)
    assert own is not None
    assert [r[0] for r in _records(own.line_info, 16)] == [0, 2]   # one line, two functions


def test_origins_that_are_not_file_lines():
    insns = [Insn(0xB7, 0, 0, 0, 0, origin="<uprobe:/bin/true:main: @ = count()>"),
             Insn(0x95, origin="<uprobe:/bin/true:main: @ = count()>")]
    own = program_btf(insns, "t")
    assert own is not None
    btf = _types(own.blob)
    (rec,) = _records(own.line_info, 16)
    assert btf.string(rec[1]) == "" and btf.string(rec[2]) == "<uprobe:/bin/true:main: @ = count()>"
    assert rec[3] == 0


def test_unreadable_files_show_file_and_line():
    insns = [Insn(0xB7, 0, 0, 0, 0, origin="<stdin>:3"), Insn(0x95, origin="<stdin>:4")]
    own = program_btf(insns, "t")
    btf = _types(own.blob)
    assert [btf.string(r[2]) for r in _records(own.line_info, 16)] == ["<stdin>:3", "<stdin>:4"]
    src = SourceLines()
    src.add("<stdin>", "r0 = 0\n  exit\n")
    insns = [Insn(0xB7, 0, 0, 0, 0, origin="<stdin>:1"), Insn(0x95, origin="<stdin>:2")]
    own = program_btf(insns, "t", source=src)
    recs = _records(own.line_info, 16)
    assert [_types(own.blob).string(r[2]) for r in recs] == ["r0 = 0", "  exit"]
    assert [r[3] & 0x3FF for r in recs] == [1, 3]


def test_no_origins_no_btf():
    assert program_btf([Insn(0xB7), Insn(0x95)], "t") is None
    assert program_btf([], "t") is None


def test_a_call_into_the_middle_of_ld_imm64_gives_no_btf():
    insns = [Insn(0x85, 0, 1, 0, 1, origin="a:1"), Insn(0x18, 0, 0, 0, 0, 0, origin="a:2"),
             Insn(0x95, origin="a:3")]
    assert program_btf(insns, "t") is None


@pytest.mark.parametrize("origin, parsed", [
    ("f.py:12", ("f.py", 12, "")), (("f.py", 3), ("f.py", 3, "")),
    ("C:/x/f.s:7", ("C:/x/f.s", 7, "")), ("<probe: x:y>", ("", 0, "<probe: x:y>")),
    (":5", ("", 0, ":5")), ("f.py:", ("", 0, "f.py:"))])
def test_parse_origin(origin, parsed):
    assert parse_origin(origin) == parsed


def test_names_become_c_identifiers():
    p = Program("9 lives")
    p.call_local("sub-1"); p.exit(); s = p.subprogram("sub-1"); s.mov(R0, 0); s.exit()  # noqa: E702
    own = program_btf(p.finalize(), p.name, p)
    assert [name for _, name in own.funcs] == ["_9_lives", "sub_1"]
    assert program_btf(p.finalize(), "", p).funcs[0][1] == "prog"


# ------------------------------------------------------------ the cold path
def test_own_btf_stays_off_the_heavy_btf_modules():
    code = ("import sys, pyebpf.btf.own, pyebpf.codecs as c; "
            "pyebpf.btf.own.map_btf(c.codec('u32'), c.codec('<QI')); "
            "print(sorted(m for m in sys.modules if m.startswith('pyebpf.btf')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout
    assert out.strip() == "['pyebpf.btf', 'pyebpf.btf.own']"


def test_callbacks_start_functions():
    p = Program("loop")
    p.ld_func(R1, "cb")
    p.exit()
    cb = p.subprogram("cb")
    cb.mov(R0, 0)
    cb.exit()
    own = program_btf(p.finalize(), p.name, p)
    assert own.funcs == [(0, "loop"), (3, "cb")]
