"""pyebpf.btf reads the kernel's BTF and clang's as bpftool does: every type
of /sys/kernel/btf/vmlinux and of a clang object, field by field, equals
``bpftool btf dump ... format raw``; C definitions equal bpftool's ``format c``;
name lookups, sizes and member offsets; split BTF; .BTF.ext."""
from __future__ import annotations

import re

import pytest
from btf_testlib import BPFTOOL, bpftool_raw, raw_dump

from pyebpf.btf import Btf, BtfError, BtfExt, Kind

needs_bpftool = pytest.mark.skipif(BPFTOOL is None, reason="bpftool is needed (make debs)")


@needs_bpftool
def test_every_vmlinux_type_equals_bpftool_raw_dump(vmlinux):
    ours = raw_dump(vmlinux)
    theirs = bpftool_raw("/sys/kernel/btf/vmlinux")
    assert len(ours) == len(theirs)
    diff = [(a, b) for a, b in zip(ours, theirs) if a != b]
    assert not diff, diff[:5]
    kinds = {vmlinux.kind(i) for i in vmlinux.ids()}
    # the kernel's BTF has every kind but ENUM64-free kernels aside these:
    assert {Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.FUNC_PROTO, Kind.VAR,
            Kind.DATASEC, Kind.DECL_TAG, Kind.TYPE_TAG, Kind.FLOAT} <= kinds


@needs_bpftool
def test_object_btf_equals_bpftool_raw_dump(bpf_objects):
    path = bpf_objects["core_read"]
    btf = Btf.load(path)
    assert raw_dump(btf) == bpftool_raw(path)


def test_task_struct_pid_offset(vmlinux):
    tid = vmlinux.type_id("struct task_struct")
    assert vmlinux.find("task_struct", Kind.STRUCT) == [tid]
    t = vmlinux[tid]
    pid = next(m for m in t.members if m.name == "pid")
    assert vmlinux.member_offset(tid, "pid") == pid.bit_offset
    assert vmlinux.member_offset("struct task_struct", "se.vruntime") == \
        vmlinux.member_offset(tid, "se") + vmlinux.member_offset("struct sched_entity", "vruntime")
    assert vmlinux.size_of(tid) == t.size
    assert vmlinux.size_of(pid.type) == 4


@needs_bpftool
def test_offsets_agree_with_the_raw_dump_text(vmlinux):
    """Independent of the parser: the raw dump's own text for task_struct."""
    lines = bpftool_raw("/sys/kernel/btf/vmlinux")
    tid = vmlinux.type_id("struct task_struct")
    start = lines.index(next(ln for ln in lines if ln.startswith(f"[{tid}] STRUCT 'task_struct'")))
    offsets = {}
    for ln in lines[start + 1:]:
        m = re.match(r"\t'(\w+)' type_id=\d+ bits_offset=(\d+)", ln)
        if not m:
            if not ln.startswith("\t"):
                break
            continue
        offsets[m.group(1)] = int(m.group(2))
    for name in ("pid", "tgid", "comm", "real_parent", "start_time", "mm"):
        assert vmlinux.member_offset(tid, name) == offsets[name], name


def test_anonymous_members_are_searched_through(vmlinux):
    skb = vmlinux.type_id("struct sk_buff")
    chain = vmlinux.member_path(skb, "mark")
    assert chain[-1][1].name == "mark" and any(not m.name for _, m in chain[:-1])


def test_formatting_declarations(vmlinux):
    tid = vmlinux.type_id("struct task_struct")
    ptr = next(i for i in vmlinux.ids() if vmlinux.kind(i) == Kind.PTR and vmlinux[i].ref == tid)
    assert vmlinux.format(ptr) == "struct task_struct *"
    comm = next(m for m in vmlinux[tid].members if m.name == "comm")
    assert vmlinux.format(comm.type, "comm") == "char comm[16]"
    fops = vmlinux[vmlinux.type_id("struct file_operations")]
    read = next(m for m in fops.members if m.name == "read")
    assert vmlinux.format(read.type, "read") == \
        "ssize_t (*read)(struct file *, char *, size_t, loff_t *)"


@needs_bpftool
@pytest.mark.parametrize("name", ["struct list_head", "struct callback_head", "struct rb_node",
                                  "struct hlist_node", "struct qspinlock", "enum pid_type",
                                  "struct file_operations", "struct llist_node"])
def test_dump_c_equals_bpftool_format_c(vmlinux, vmlinux_h, name):
    ours = vmlinux.dump_c(name)
    assert ours in vmlinux_h, ours


@pytest.fixture(scope="module")
def vmlinux_h() -> str:
    import subprocess
    return subprocess.run([BPFTOOL, "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format",
                           "c"], capture_output=True, text=True, check=True).stdout


def test_typedef_and_enum_definitions(vmlinux):
    assert vmlinux.dump_c("pid_t") == "typedef __kernel_pid_t pid_t;"
    assert vmlinux.dump_c("enum pid_type").startswith("enum pid_type {\n\tPIDTYPE_PID = 0,\n")


def test_unknown_name_says_so(vmlinux):
    with pytest.raises(BtfError, match="no type struct 'task_strukt'"):
        vmlinux.type_id("struct task_strukt")


def test_opening_vmlinux_is_lazy(vmlinux):
    """Opening indexes offsets only; finding a name decodes a few types (what
    keeps it quick, counted rather than timed: the kernel has ~100,000)."""
    btf = Btf.vmlinux()
    tid = btf.type_id("task_struct", Kind.STRUCT)
    btf.member_offset(tid, "pid")
    assert len(btf._cache) < 50


def test_ext_records_of_a_clang_object(bpf_objects):
    path = bpf_objects["core_read"]
    ext = BtfExt.from_elf(path)
    sec = "tp/sched/sched_process_exec"
    (fi,) = ext.func_info[sec]
    assert fi.insn_off == 0 and ext.btf[fi.type_id].name == "core_read"
    lines = ext.line_info[sec]
    assert all(li.file_name.endswith("core_read.bpf.c") for li in lines)
    assert any("BPF_CORE_READ(t, pid)" in li.line_text for li in lines)
    src = open(lines[0].file_name).read().splitlines() if lines[0].file_name.startswith("/") \
        else None
    if src:
        for li in lines:
            if li.line_text:          # clang writes some records with no line (0, "")
                assert src[li.line - 1] == li.line_text
    relos = ext.core_relos[sec]
    assert len(relos) >= 20 and {r.kind for r in relos} >= set(range(12))
    assert all(re.fullmatch(r"\d+(:\d+)*", r.access) for r in relos)


def test_split_btf_on_a_base(tmp_path):
    from pyebpf.btf import BtfBuilder
    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)
    b.add_struct("base_s", 4, [("x", u32, 0)])
    base = Btf(b.build())
    s = BtfBuilder(base=base)
    ptr = s.add_ptr(2)
    mod = s.add_struct("mod_s", 16, [("p", ptr, 0), ("y", u32, 64), ("z", 1, 96)])
    split = Btf(s.build(), base=base)
    assert (ptr, mod) == (3, 4) and len(split) == 5
    assert split.format(ptr) == "struct base_s *"
    assert split.find("mod_s") == [4] and split.find("base_s") == [2]
    assert split.member_offset(4, "y") == 64 and split[4].members[0].name == "p"
    if BPFTOOL:
        (tmp_path / "base").write_bytes(base.data)
        (tmp_path / "split").write_bytes(split.data)
        assert raw_dump(split) == bpftool_raw(str(tmp_path / "split"), base=str(tmp_path / "base"))
