"""CO-RE relocations resolved by pyebpf.btf.core equal libbpf's: every
relocation of a clang-built object (tests/btf/c/core_read.bpf.c, every kind
clang 14 emits, flavors, a missing field, a missing type, bitfields,
anonymous unions, array elements) resolves to the value libbpf patches in
(``bpftool -d prog loadall`` prints each), and the field offsets equal the
kernel BTF's own member offsets.  type_matches (which clang 14 cannot emit)
and the ambiguity and flavor rules are tested on built BTF."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest
from btf_testlib import BPFTOOL

from pyebpf.btf import Btf, BtfBuilder, BtfError, BtfExt
from pyebpf.btf.core import (ENUMVAL_VALUE, FIELD_BYTE_OFFSET, FIELD_EXISTS, TYPE_EXISTS,
                             TYPE_MATCHES, TYPE_SIZE, CoreResolver, essential_name)

SEC = "tp/sched/sched_process_exec"


def _libbpf_relocations(obj: str) -> dict[int, tuple[int, int | None]]:
    """``{relo index: (insn index, new value or None when poisoned)}`` from
    libbpf's debug output while it loads the object."""
    pin = tempfile.mkdtemp(prefix="pyebpf-btf-", dir="/sys/fs/bpf")
    try:
        res = subprocess.run([BPFTOOL, "-d", "prog", "loadall", obj, pin], capture_output=True,
                             text=True)
    finally:
        for name in os.listdir(pin):
            os.unlink(os.path.join(pin, name))
        os.rmdir(pin)
    assert res.returncode == 0, res.stderr[-2000:]
    out: dict[int, tuple[int, int | None]] = {}
    for m in re.finditer(r"relo #(\d+): patched insn #(\d+) \([^)]*\) imm(?:64)? (-?\d+) -> "
                         r"(-?\d+)", res.stderr):
        out[int(m.group(1))] = (int(m.group(2)), int(m.group(4)))
    for m in re.finditer(r"relo #(\d+): substituting insn #(\d+) w/ invalid insn", res.stderr):
        out[int(m.group(1))] = (int(m.group(2)), None)
    return out


@pytest.fixture(scope="module")
def resolved(bpf_objects, vmlinux):
    path = bpf_objects["core_read"]
    local = Btf.load(path)
    ext = BtfExt.from_elf(path, local)
    resolver = CoreResolver(vmlinux)
    relos = ext.core_relos[SEC]
    return path, local, relos, [resolver.resolve(local, r) for r in relos]


@pytest.mark.kernel
def test_every_relocation_equals_libbpfs(resolved):
    if BPFTOOL is None:
        pytest.skip("bpftool is needed (make debs)")
    path, _, relos, results = resolved
    libbpf = _libbpf_relocations(path)
    assert len(libbpf) == len(relos)
    ours = {i: (r.insn_off // 8, None if res.poison else res.new)
            for i, (r, res) in enumerate(zip(relos, results))}
    assert ours == libbpf


def test_values_against_the_kernel_btf(resolved, vmlinux):
    """Independent of libbpf: what each relocation must be, read from the
    kernel's BTF by name."""
    _, local, relos, results = resolved
    by = {}
    for r, res in zip(relos, results):
        by.setdefault((res.local.describe(), r.kind_name), res)
    task = vmlinux.type_id("struct task_struct")
    off = lambda path: vmlinux.member_offset(task, path) // 8   # noqa: E731
    assert by["struct task_struct.pid", "field_byte_offset"].new == off("pid")
    assert by["struct task_struct.tgid", "field_byte_offset"].new == off("tgid")
    assert by["struct task_struct.comm[3]", "field_byte_offset"].new == off("comm") + 3
    assert by["struct task_struct.se.vruntime", "field_byte_offset"].new == off("se.vruntime")
    assert by["struct task_struct___old.pid", "field_byte_offset"].new == off("pid")
    assert by["struct task_struct___old.pid", "field_byte_offset"].orig == 8
    skb = vmlinux.type_id("struct sk_buff")
    assert by["struct sk_buff.mark", "field_byte_offset"].new == \
        vmlinux.member_offset(skb, "mark") // 8
    assert by["struct task_struct.comm", "field_byte_size"].new == 16
    assert by["struct task_struct", "type_id_target"].new == task
    assert by["struct task_struct", "type_id_local"].new == \
        local.type_id("struct task_struct")
    assert by["struct task_struct", "type_size"].new == vmlinux[task].size
    assert by["struct pyebpf_no_such_type", "type_exists"].new == 0
    assert by["struct task_struct___old", "type_exists"].new == 1
    assert by["struct task_struct___old.state", "field_exists"].new == 0
    assert by["struct task_struct___old.state", "field_byte_offset"].poison
    assert by["enum pid_type::PIDTYPE_SID", "enumval_value"].new == 3
    assert by["struct task_struct.pid", "field_signed"].new == 1
    assert by["struct task_struct.start_time", "field_signed"].new == 0
    bit = vmlinux.member_offset(task, "sched_reset_on_fork")
    assert by["struct task_struct.sched_reset_on_fork", "field_byte_offset"].new == bit // 32 * 4
    assert by["struct task_struct.sched_reset_on_fork", "field_lshift_u64"].new == \
        64 - (bit % 32 + 1)
    assert by["struct task_struct.sched_reset_on_fork", "field_rshift_u64"].new == 63


def test_essential_names():
    assert essential_name("task_struct___old") == "task_struct"
    assert essential_name("a___b___c") == "a___b"
    assert essential_name("task_struct") == "task_struct"
    assert essential_name("x____y") == "x____y"          # 4 underscores: no flavor
    assert essential_name("___x") == "___x"
    assert essential_name("x___") == "x___"


def _target() -> Btf:
    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)                    # 1
    s32 = b.add_int("int", 4, signed=True)                # 2
    b.add_struct("pair", 8, [("a", u32, 0), ("b", s32, 32)])           # 3
    b.add_struct("pair___v2", 8, [("b", s32, 0), ("a", u32, 32)])      # 4
    lh = b.add_fwd("node")                                # 5
    p = b.add_ptr(lh)                                     # 6
    b.add_struct("list", 16, [("next", p, 0), ("prev", p, 64)])        # 7
    b.add_enum("mode", [("M_A", 0), ("M_B", 7)])          # 8
    return Btf(b.build())


def _local(builder_fn) -> Btf:
    b = BtfBuilder()
    builder_fn(b)
    return Btf(b.build())


def test_disagreeing_candidates_are_an_error():
    local = _local(lambda b: b.add_struct("pair", 8, [("a", b.add_int("unsigned int", 4), 0)]))
    resolver = CoreResolver(_target())
    with pytest.raises(BtfError, match="ambiguity"):
        resolver.resolve(local, (2, "0:0", FIELD_BYTE_OFFSET))
    # a flavor-free name matches both flavors; type relocations agree, so no error
    assert resolver.resolve(local, (2, "0", TYPE_SIZE)).new == 8


def test_incompatible_field_type_does_not_match():
    def build(b):
        f = b.add_float("double", 8)
        b.add_struct("list", 16, [("next", f, 0)])
    res = CoreResolver(_target()).resolve(_local(build), (2, "0:0", FIELD_EXISTS))
    assert res.new == 0 and res.target is None


def test_type_matches():
    def same(b):
        fwd = b.add_fwd("node")
        p = b.add_ptr(fwd)
        b.add_struct("list___mine", 16, [("next", p, 0), ("prev", p, 64)])

    def extra_member(b):
        fwd = b.add_fwd("node")
        p = b.add_ptr(fwd)
        b.add_struct("list", 24, [("next", p, 0), ("prev", p, 64), ("tail", p, 128)])

    def wrong_kind(b):
        fwd = b.add_fwd("node", union=True)
        p = b.add_ptr(fwd)
        b.add_struct("list", 16, [("next", p, 0)])

    resolver = CoreResolver(_target())
    assert resolver.resolve(_local(same), (3, "0", TYPE_MATCHES)).new == 1
    assert resolver.resolve(_local(extra_member), (3, "0", TYPE_MATCHES)).new == 0
    assert resolver.resolve(_local(wrong_kind), (3, "0", TYPE_MATCHES)).new == 0
    assert resolver.resolve(_local(extra_member), (3, "0", TYPE_EXISTS)).new == 1


def test_enum_values_by_name_and_poison():
    def build(b):
        b.add_enum("mode___old", [("M_B", 1), ("M_GONE", 2)])
    local = _local(build)
    resolver = CoreResolver(_target())
    assert resolver.resolve(local, (1, "0", ENUMVAL_VALUE)).new == 7
    gone = resolver.resolve(local, (1, "1", ENUMVAL_VALUE))
    assert gone.poison and gone.orig == 2


@pytest.mark.parametrize("relo,match", [((1, "0:5", FIELD_BYTE_OFFSET), "member 5"),
                                        ((1, "x", FIELD_BYTE_OFFSET), "access string"),
                                        ((1, "0:0", 99), "kind 99"),
                                        ((9, "0", TYPE_SIZE), "no such type"),
                                        ((1, "0:1", TYPE_SIZE), "must be")])
def test_bad_relocations_are_btf_errors(relo, match):
    local = _local(lambda b: b.add_struct("pair", 8, [("a", b.add_int("int", 4), 0)]))
    local = Btf(local.data)
    with pytest.raises(BtfError, match=match):
        CoreResolver(_target()).resolve(local, (2,) + relo[1:] if relo[0] == 1 else relo)


def test_plain_records_take_fields_in_order():
    """The records without an __init__ of their own: fields in __slots__
    order, the trailing defaults filled, a wrong count named."""
    from pyebpf.btf.core import CoreResult
    from pyebpf.btf.ext import CoreRelo, FuncInfo
    r = CoreResult(FIELD_BYTE_OFFSET, 8, 16, False, True, None, None)
    assert (r.orig, r.new, r.orig_size, r.new_type_id, r.kind_name) == \
        (8, 16, 0, 0, "field_byte_offset")
    assert CoreResult(FIELD_BYTE_OFFSET, 8, 16, False, True, None, None, 4, 8).new_size == 8
    assert FuncInfo("uprobe", 0, 3) == FuncInfo("uprobe", 0, 3) != FuncInfo("uprobe", 8, 3)
    assert CoreRelo(".text", 16, 2, "0:1", 0).access == "0:1"
    with pytest.raises(TypeError, match=r"FuncInfo takes 3 fields \(section, insn_off, type_id\)"):
        FuncInfo("uprobe", 0)                            # type: ignore[call-arg]
    with pytest.raises(TypeError, match="not 12"):
        CoreResult(*range(12))                           # type: ignore[arg-type]
