"""The syscall layer against the real kernel: errno mapping, Fd, prog_load and
its log, test_run, object info, ids, stats, links and perf events."""
from __future__ import annotations

import errno
import os
import struct

import pytest

from pyebpf.errors import (AttachError, KernelError, NotSupportedError,
                           PermissionDeniedError, VerifierError)
from pyebpf.kernel import syscall as sc
from pyebpf.kernel.constants import AttachType, LinkType, MapType, ProgType
from pyebpf.kernel.ffi import ffi

pytestmark = pytest.mark.kernel

RET0 = b"\xb7\x00\x00\x00\x00\x00\x00\x00\x95\x00\x00\x00\x00\x00\x00\x00"
LONE_EXIT = b"\x95" + 7 * b"\x00"


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, dst | (src << 4), off, imm)


def mov64_imm(dst: int, imm: int) -> bytes:
    return insn(0xB7, dst, imm=imm)


def ld_map_fd(dst: int, fd: int) -> bytes:
    return insn(0x18, dst, 1, imm=fd) + insn(0, imm=0)


EXIT = insn(0x95)


def free_fd_number() -> int:
    fd = os.open("/dev/null", os.O_RDONLY)
    os.close(fd)
    return fd


# ---------------------------------------------------------------- errno mapping
def test_bad_map_type_is_not_supported_with_a_helpful_message():
    with pytest.raises(NotSupportedError) as ei:
        sc.map_create(9999, 4, 4, 1)
    e = ei.value
    assert e.errno == errno.EINVAL
    assert "map type" in str(e) and "not supported" in str(e)
    assert "key/value size" in e.hint


def test_bad_sizes_say_what_to_check():
    with pytest.raises(NotSupportedError) as ei:
        sc.map_create(MapType.PERF_EVENT_ARRAY, 4, 8, 1)
    assert "PERF_EVENT_ARRAY needs 4/4" in str(ei.value)


def test_unknown_fd_is_ebadf():
    with pytest.raises(KernelError) as ei:
        sc.map_lookup(free_fd_number(), b"\0" * 4, 4)
    assert ei.value.errno == errno.EBADF
    assert not isinstance(ei.value, (NotSupportedError, PermissionDeniedError))


def test_non_map_fd_is_einval_with_hint():
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        with pytest.raises(KernelError) as ei:
            sc.map_lookup(fd, b"\0" * 4, 4)
        assert ei.value.errno == errno.EINVAL
        assert "not a BPF map" in str(ei.value)
    finally:
        os.close(fd)


def test_eperm_mentions_capabilities():
    """An unprivileged child gets PermissionDeniedError naming CAP_BPF."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        try:
            os.setgid(65534)
            os.setuid(65534)
            sc.map_create(MapType.HASH, 4, 4, 1)
            msg = b"created"
        except PermissionDeniedError as exc:
            msg = b"EPERM:" + str(exc).encode()
        except BaseException as exc:
            msg = b"other:" + repr(exc).encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert out.startswith(b"EPERM:"), out
    assert b"CAP_BPF" in out


def test_error_for_classes():
    assert isinstance(sc.error_for(errno.EPERM, "x"), PermissionDeniedError)
    assert isinstance(sc.error_for(errno.ENOMEM, "x"), KernelError)
    assert "ulimit -l" in sc.error_for(errno.ENOMEM, "x").hint
    assert isinstance(sc.error_for(sc.ENOTSUPP, "x"), NotSupportedError)
    e = sc.error_for(errno.EBADF, "BPF_MAP_LOOKUP_ELEM", "fd 5")
    assert e.errno == errno.EBADF and "BPF_MAP_LOOKUP_ELEM" in str(e)


# -------------------------------------------------------------------------- Fd
def test_fd_close_is_idempotent_and_never_zero(no_fd_leak):
    fd = sc.map_create(MapType.ARRAY, 4, 4, 1)
    n = fd.fileno()
    assert n > 0 and os.path.exists(f"/proc/self/fd/{n}")
    fd.close()
    fd.close()
    assert fd.closed
    with pytest.raises(KernelError) as ei:
        fd.fileno()
    assert ei.value.errno == errno.EBADF


def test_fd_context_manager_and_gc(no_fd_leak):
    with sc.map_create(MapType.ARRAY, 4, 4, 1) as fd:
        n = fd.fileno()
        assert os.path.exists(f"/proc/self/fd/{n}")
    assert fd.closed
    fd2 = sc.map_create(MapType.ARRAY, 4, 4, 1)
    del fd2  # collected -> closed by the finalizer (checked by no_fd_leak)


def test_fd_zero_is_moved(no_fd_leak):
    saved = os.dup(0)
    try:
        os.close(0)
        fd = sc.map_create(MapType.ARRAY, 4, 4, 1)   # the kernel hands out fd 0
        try:
            assert fd.fileno() >= 1
            assert sc.map_info(fd).type == MapType.ARRAY
        finally:
            fd.close()
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def test_fd_detach_and_dup(no_fd_leak):
    fd = sc.map_create(MapType.ARRAY, 4, 4, 1)
    d = fd.dup()
    assert d.fileno() != fd.fileno()
    assert sc.map_info(d).id == sc.map_info(fd).id
    raw = fd.detach()
    assert fd.closed
    os.close(raw)
    d.close()


# ------------------------------------------------------------------ elem ops
def test_raw_elem_ops_round_trip(no_fd_leak):
    with sc.map_create(MapType.HASH, 4, 8, 8, name="raw") as fd:
        k = struct.pack("<I", 7)
        assert sc.map_lookup(fd, k, 8) is None
        sc.map_update(fd, k, struct.pack("<Q", 99))
        assert sc.map_lookup(fd, k, 8) == struct.pack("<Q", 99)
        assert sc.map_get_next_key(fd, None, 4) == k
        assert sc.map_get_next_key(fd, k, 4) is None
        with pytest.raises(KernelError) as ei:
            sc.map_update(fd, k, struct.pack("<Q", 1), flags=1)  # BPF_NOEXIST
        assert ei.value.errno == errno.EEXIST
        assert sc.map_lookup_and_delete(fd, k, 8) == struct.pack("<Q", 99)
        assert not sc.map_delete(fd, k)


def test_raw_batch_ops(no_fd_leak):
    with sc.map_create(MapType.HASH, 4, 4, 100) as fd:
        keys = b"".join(struct.pack("<I", i) for i in range(50))
        vals = b"".join(struct.pack("<I", i * 3) for i in range(50))
        sc.map_update_batch(fd, keys, vals, 50, 4, 4)
        got = dict(sc.map_lookup_batch(fd, 4, 4, chunk=7))
        assert len(got) == 50
        assert got[struct.pack("<I", 10)] == struct.pack("<I", 30)
        assert sc.map_delete_batch(fd, keys[:160], 40, 4) == 40
        assert len(list(sc.map_lookup_batch(fd, 4, 4))) == 10


def test_map_info_and_name(no_fd_leak):
    with sc.map_create(MapType.HASH, 4, 8, 16, name="my-map.1") as fd:
        info = sc.map_info(fd)
        assert (info.type, info.key_size, info.value_size, info.max_entries) == (1, 4, 8, 16)
        assert info.name == "my_map.1"   # '-' is not allowed by the kernel
        assert info.type_name == "HASH"
        with sc.map_get_fd_by_id(info.id) as again:
            assert sc.map_info(again).id == info.id


def test_freeze_refuses_updates(no_fd_leak):
    with sc.map_create(MapType.ARRAY, 4, 4, 1) as fd:
        sc.map_freeze(fd)
        with pytest.raises(PermissionDeniedError) as ei:
            sc.map_update(fd, b"\0" * 4, b"\1\0\0\0")
        assert "frozen" in str(ei.value)


# ------------------------------------------------------------------- programs
def test_prog_load_valid(no_fd_leak):
    fd, log = sc.prog_load(ProgType.SOCKET_FILTER, RET0, name="ret0")
    with fd:
        assert log == ""
        info = sc.prog_info(fd)
        assert info.type == ProgType.SOCKET_FILTER and info.name == "ret0"
        assert len(info.tag) == 16
        assert sc.prog_xlated_insns(fd) == RET0
        img = sc.prog_jited(fd)
        assert img.code and len(img.ksyms) == 1 and img.func_lens == (len(img.code),)
        assert sc.prog_jited_insns(fd) == img.code


def test_prog_load_log_of_success():
    fd, log = sc.prog_load(ProgType.SOCKET_FILTER, RET0, log_level=2)
    fd.close()
    assert "processed 2 insns" in log


def test_broken_program_raises_verifier_error(no_fd_leak):
    with pytest.raises(VerifierError) as ei:
        sc.prog_load(ProgType.SOCKET_FILTER, LONE_EXIT)
    e = ei.value
    assert e.errno == errno.EACCES
    assert "R0 !read_ok" in e.log
    assert e.message == "R0 !read_ok"
    assert e.index is None and e.origin is None
    assert "r0" in e.hint


def test_verifier_log_grows_from_a_tiny_buffer(no_fd_leak):
    n = 3000
    prog = b"".join(mov64_imm(1 + i % 5, i) for i in range(n)) + RET0
    fd, log = sc.prog_load(ProgType.SOCKET_FILTER, prog, log_level=2, log_size=64)
    fd.close()
    assert len(log) > 64 * 1000
    assert f"processed {n + 2} insns" in log
    assert f"{n - 1}: (b7) r{1 + (n - 1) % 5} = {n - 1}" in log


def test_failure_log_grows_too(no_fd_leak):
    with pytest.raises(VerifierError) as ei:
        sc.prog_load(ProgType.SOCKET_FILTER, LONE_EXIT, log_level=1, log_size=16)
    assert "R0 !read_ok" in ei.value.log


def test_unknown_prog_type_is_not_supported():
    with pytest.raises(NotSupportedError):
        sc.prog_load(999, RET0)


def test_verifier_message_skips_stats():
    log = "0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000)\n\n"
    assert sc.verifier_message(log) == "R0 !read_ok"


def test_test_run_retval_and_data(no_fd_leak):
    fd, _ = sc.prog_load(ProgType.XDP, mov64_imm(0, 2) + EXIT)   # XDP_PASS
    with fd:
        data = bytes(range(64))
        r = sc.prog_test_run(fd, data, repeat=10)
        assert r.retval == 2
        assert r.data_out == data
        assert r.duration_ns >= 0
        retval, out, dur, ctx_out = r
        assert ctx_out is None


def test_test_run_not_supported_type(no_fd_leak):
    fd, _ = sc.prog_load(ProgType.KPROBE, RET0)
    with fd, pytest.raises(NotSupportedError):
        sc.prog_test_run(fd)


def test_prog_info_map_ids_and_fd_by_id(no_fd_leak):
    m = sc.map_create(MapType.ARRAY, 4, 8, 1)
    prog = ld_map_fd(1, m.fileno()) + RET0
    fd, _ = sc.prog_load(ProgType.SOCKET_FILTER, prog, fd_array=None)
    with fd, m:
        info = sc.prog_info(fd)
        assert info.map_ids == (sc.map_info(m).id,)
        assert sc.prog_get_next_id(0) is not None
        with sc.prog_get_fd_by_id(info.id) as again:
            assert sc.prog_info(again).tag == info.tag


def test_get_fd_by_missing_id():
    with pytest.raises(KernelError) as ei:
        sc.prog_get_fd_by_id(0x7FFFFFF0)
    assert ei.value.errno == errno.ENOENT and "no program" in str(ei.value)


def test_enable_stats_counts_runs(no_fd_leak):
    fd, _ = sc.prog_load(ProgType.XDP, mov64_imm(0, 2) + EXIT)
    with fd:
        with sc.enable_stats():
            before = sc.prog_info(fd).run_cnt
            sc.prog_test_run(fd, bytes(64), repeat=5)
            info = sc.prog_info(fd)
            assert info.run_cnt == before + 5
            assert info.run_time_ns > 0
        sc.prog_test_run(fd, bytes(64), repeat=5)      # stats off again: not counted
        assert sc.prog_info(fd).run_cnt == before + 5


# ---------------------------------------------------------------------- links
def _elf_entry_offset(path: str) -> int:
    """File offset of the ELF entry point (PT_LOAD mapping), little-endian 64-bit."""
    with open(path, "rb") as f:
        data = f.read(1 << 16)
    entry, phoff = struct.unpack_from("<QQ", data, 0x18)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1 and p_vaddr <= entry < p_vaddr + p_filesz:
            return entry - p_vaddr + p_offset
    raise AssertionError("entry not in a PT_LOAD segment")


def test_uprobe_multi_link_and_info(no_fd_leak):
    from pyebpf.kernel import features
    if not features.has_uprobe_multi():
        pytest.skip(features.has_uprobe_multi().reason)
    target = os.path.realpath("/bin/true")
    off = _elf_entry_offset(target)
    fd, _ = sc.prog_load(ProgType.KPROBE, RET0, expected_attach_type=AttachType.TRACE_UPROBE_MULTI)
    with fd:
        with sc.uprobe_multi_link(fd, target, [off], cookies=[42]) as link:
            info = sc.link_info(link)
            assert info.type == LinkType.UPROBE_MULTI and info.type_name == "UPROBE_MULTI"
            assert info.prog_id == sc.prog_info(fd).id
            assert info.uprobe_multi.path == target
            assert info.uprobe_multi.offsets == (off,)
            assert info.uprobe_multi.cookies == (42,)


def test_uprobe_multi_missing_file(no_fd_leak):
    fd, _ = sc.prog_load(ProgType.KPROBE, RET0, expected_attach_type=AttachType.TRACE_UPROBE_MULTI)
    with fd, pytest.raises(AttachError) as ei:
        sc.uprobe_multi_link(fd, "/nonexistent/binary", [0x10])
    assert ei.value.errno == errno.ENOENT


def test_perf_event_link_on_uprobe_pmu(no_fd_leak):
    from pyebpf.kernel import features, perf
    if not features.has_uprobe_pmu():
        pytest.skip(features.has_uprobe_pmu().reason)
    target = os.path.realpath("/bin/true")
    off = _elf_entry_offset(target)
    fd, _ = sc.prog_load(ProgType.KPROBE, RET0)
    with fd, perf.uprobe_attr(target, off).open(pid=-1, cpu=0) as pfd:
        with sc.perf_event_link(fd, pfd, cookie=7) as link:
            info = sc.link_info(link)
            assert info.type == LinkType.PERF_EVENT
            assert info.perf_event_type == 1   # BPF_PERF_EVENT_UPROBE


def test_raw_tracepoint_open(no_fd_leak):
    fd, _ = sc.prog_load(ProgType.RAW_TRACEPOINT, RET0)
    with fd:
        with pytest.raises(AttachError) as ei:
            sc.raw_tracepoint_open("no_such_tracepoint_xyz", fd)
        assert ei.value.errno == errno.ENOENT
        with sc.raw_tracepoint_open("sched_switch", fd) as link:
            info = sc.link_info(link)
            assert info.type == LinkType.RAW_TRACEPOINT
            assert info.raw_tracepoint == "sched_switch"


# ---------------------------------------------------------------- perf events
def test_bpf_output_event_and_ioctls(no_fd_leak):
    from pyebpf.kernel import perf
    with perf.open_bpf_output(0) as pfd:
        assert sc.perf_event_id(pfd) > 0
        sc.perf_event_enable(pfd)
        sc.perf_event_disable(pfd)
        sc.perf_event_reset(pfd)
        with pytest.raises(KernelError):           # needs an mmap'ed ring first
            sc.perf_event_pause_output(pfd)


def test_perf_event_open_bad_attr():
    a = ffi.new("struct perf_event_attr *")
    a.type = 9999
    with pytest.raises(KernelError) as ei:
        sc.perf_event_open(a, -1, 0)
    assert ei.value.errno in (errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP)


def test_uprobe_attr_config():
    from pyebpf.kernel import features, perf
    if not features.has_uprobe_pmu():
        pytest.skip(features.has_uprobe_pmu().reason)
    a = perf.uprobe_attr("/bin/true", 0x1234, retprobe=True, ref_ctr_offset=0x40)
    assert a.type == perf.uprobe_pmu_type()
    assert a.config == 1 | (0x40 << 32)
    assert a.config2 == 0x1234
    assert ffi.string(ffi.cast("char *", a.config1)) == b"/bin/true"
    assert a.size >= 72


def test_possible_and_online_cpus():
    from pyebpf.kernel import cpus
    assert cpus.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    poss = cpus.possible_cpus()
    assert poss and set(cpus.online_cpus()) <= set(poss)
    assert cpus.num_possible_cpus() == len(poss)


def test_bpf_output_attr_flags(no_fd_leak):
    from pyebpf.kernel import perf
    from pyebpf.kernel.constants import (PERF_ATTR_FLAG_WATERMARK, PERF_COUNT_SW_BPF_OUTPUT,
                                         PERF_SAMPLE_RAW, PERF_TYPE_SOFTWARE)
    a = perf.bpf_output_attr(wakeup_watermark=4096)
    assert (a.type, a.config, a.sample_type) == (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_BPF_OUTPUT,
                                                 PERF_SAMPLE_RAW)
    assert a.flags & PERF_ATTR_FLAG_WATERMARK and a.wakeup_watermark == 4096
    b = perf.bpf_output_attr(wakeup_events=3)
    assert not b.flags & PERF_ATTR_FLAG_WATERMARK and b.wakeup_events == 3
    for cpu in __import__("pyebpf.kernel.cpus", fromlist=["x"]).online_cpus():
        with a.open(pid=-1, cpu=cpu) as fd:
            assert fd.fileno() > 0


def test_kprobe_attr_without_a_kprobe_pmu_says_so():
    from pyebpf.kernel import perf
    if perf.kprobe_pmu_type() is not None:
        a = perf.kprobe_attr("do_sys_openat2", retprobe=True)
        assert a.type == perf.kprobe_pmu_type() and a.config2 == 0
        return
    with pytest.raises(NotSupportedError, match="CONFIG_KPROBES"):
        perf.kprobe_attr("do_sys_openat2")
