"""BtfBuilder writes blobs that the kernel loads (BPF_BTF_LOAD), that parse
back to the same types, and that bpftool dumps as pyebpf does."""
from __future__ import annotations

import pytest
from btf_samples import every_kind
from btf_testlib import BPFTOOL, bpftool_raw, raw_dump
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.btf import Btf, BtfBuilder, BtfError, Kind
from pyebpf.errors import KernelError, PyebpfError


def test_every_kind_round_trips():
    b = every_kind()
    btf = Btf(b.build())
    assert [btf[i] for i in btf.ids()] == b.types
    assert {btf.kind(i) for i in btf.ids()} == set(range(1, 20))
    assert btf.format(btf.type_id("sample", Kind.STRUCT)) == "struct sample"
    assert btf.dump_c("sample") == (
        "struct sample {\n\tunsigned int a;\n\tunsigned int flag: 1;\n\tunsigned int bits: 7;\n"
        "\tchar name[16];\n\tunion {\n\t\tlong long i;\n\t\tunsigned int u;\n\t};\n"
        "\tstruct later *next;\n\tvolatile unsigned int v;\n\t_Bool b;\n};")
    assert btf.format(31) == "void (const char *fmt, ...)"
    assert btf.format(btf.type_id("rptr")) == "rptr"
    assert btf.format(btf[27].ref) == "const char *restrict"
    assert btf.dump_c("handle") == "long long handle(struct sample *s, u32_t t);"
    assert btf[13].values[2].value == -2 and btf[14].values[1].value == 1 << 40


@pytest.mark.skipif(BPFTOOL is None, reason="bpftool is needed (make debs)")
def test_bpftool_reads_what_the_builder_writes(tmp_path):
    path = tmp_path / "every.btf"
    path.write_bytes(every_kind().build())
    assert raw_dump(Btf.load(str(path))) == bpftool_raw(str(path))


@pytest.mark.kernel
def test_the_kernel_loads_every_kind(no_fd_leak):
    from pyebpf.kernel.btf import btf_load
    with btf_load(every_kind().build()) as fd:
        assert fd.fileno() > 0


@pytest.mark.kernel
def test_a_rejection_carries_the_kernel_log(no_fd_leak):
    from pyebpf.kernel.btf import btf_load
    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)
    b.add_struct("pair", 8, [("a", u32, 0), ("b", u32, 64)])     # b lies past the end
    with pytest.raises(KernelError, match="Member exceeds struct_size") as info:
        btf_load(b.build())
    assert "STRUCT pair" in info.value.log
    assert isinstance(info.value, PyebpfError)


def test_builder_refuses_bad_types():
    b = BtfBuilder()
    b.add_ptr(5)
    with pytest.raises(BtfError, match=r"type \[1\].*refers to type \[5\]"):
        b.build()
    b = BtfBuilder()
    u8 = b.add_int("u8", 1)
    b.add_enum("e", [("X", 1 << 33)])
    with pytest.raises(BtfError, match="does not fit in 32 bits"):
        b.build()
    with pytest.raises(BtfError, match="NUL"):
        BtfBuilder().string("a\0b")
    b = BtfBuilder()
    b.add_struct("s", 1, [("x", u8, 0, 300)])
    with pytest.raises(BtfError, match="does not fit"):
        b.build()


def test_copy_from_an_object_keeps_every_type(bpf_objects):
    btf = Btf.load(bpf_objects["core_read"])
    again = Btf(BtfBuilder().copy_from(btf).build())
    assert [again[i] for i in again.ids()] == [btf[i] for i in btf.ids()]


# ---------------------------------------------------------------- property
_names = st.sampled_from(["", "a", "b", "task", "x___v2", "long name"])


@st.composite
def _types(draw):
    """A builder with random (valid) types: references point to earlier ids."""
    b = BtfBuilder()
    b.add_int("int", 4, signed=True)
    for _ in range(draw(st.integers(1, 25))):
        n = len(b)
        ref = st.integers(0, n - 1)
        choice = draw(st.integers(0, 12))
        name = draw(_names)
        if choice == 0:
            b.add_int(name or "i", draw(st.sampled_from([1, 2, 4, 8])), draw(st.booleans()))
        elif choice == 1:
            b.add_ptr(draw(ref))
        elif choice == 2:
            b.add_array(draw(st.integers(1, n - 1)), draw(st.integers(0, 100)), index=1)
        elif choice in (3, 4):
            ms = draw(st.lists(st.tuples(_names, st.integers(1, n - 1), st.integers(0, 1000),
                                         st.integers(0, 64)), max_size=6))
            b.add_struct(name, draw(st.integers(0, 4096)), ms, union=choice == 4)
        elif choice == 5:
            vals = draw(st.lists(st.tuples(_names, st.integers(-(1 << 31), (1 << 31) - 1)),
                                 max_size=5))
            b.add_enum(name, vals)
        elif choice == 6:
            b.add_enum(name, draw(st.lists(st.tuples(_names, st.integers(0, (1 << 64) - 1)),
                                           max_size=4)), size=8, signed=False)
        elif choice == 7:
            b.add_typedef(name or "t", draw(ref))
        elif choice == 8:
            b.add_func_proto(draw(ref), draw(st.lists(st.tuples(_names, ref), max_size=4)))
        elif choice == 9:
            b.add_var(name or "v", draw(st.integers(1, n - 1)), draw(st.integers(0, 2)))
        elif choice == 10:
            b.add_fwd(name or "f", draw(st.booleans()))
        elif choice == 11:
            b.add_decl_tag(name or "tag", draw(st.integers(1, n - 1)), draw(st.integers(-1, 3)))
        else:
            b.add_float(name or "float", draw(st.sampled_from([4, 8, 16])))
    return b


@fuzz_settings(200)
@given(b=_types())
def test_built_types_parse_back_equal(b):
    btf = Btf(b.build())
    assert [btf[i] for i in btf.ids()] == b.types
    for i in btf.ids():               # queries answer or raise BtfError, nothing else
        try:
            btf.format(i)
            btf.size_of(i)
        except BtfError:
            pass
