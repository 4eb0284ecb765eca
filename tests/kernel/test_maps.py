"""Every map class round-trips values through the real kernel."""
from __future__ import annotations

import ctypes
import errno
import gc
import os
import struct
import threading

import pytest

from pyebpf import maps
from pyebpf.errors import (KernelError, MapFullError, MapKeyError, NotSupportedError,
                           PermissionDeniedError, SizeError)
from pyebpf.kernel import core, mapops
from pyebpf.kernel import syscall as sc
from pyebpf.kernel.constants import BPF_EXIST, BPF_NOEXIST, MapType, ProgType
from pyebpf.kernel.cpus import num_possible_cpus
from pyebpf.maps import (ArrayMap, Bytes, HashMap, LruHashMap, LruPerCpuHashMap, Map,
                         PerCpuArrayMap, PerCpuHashMap, PerfEventArray, QueueMap, RingBuf,
                         StackMap, StackTraceMap)

# (each test that needs the kernel is marked `kernel`; the others run under every Python)

NCPU = num_possible_cpus()


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint64)]


# ------------------------------------------------------------------- codecs
def test_codec_specs():
    assert maps.codec(4).size == 4 and maps.codec(4).label == "u32"
    assert maps.codec("s16").encode(-2) == struct.pack("<h", -2)
    assert maps.codec("<QI").decode(struct.pack("<QI", 1, 2)) == (1, 2)
    assert maps.codec("<Q").decode(struct.pack("<Q", 5)) == 5
    assert maps.codec(ctypes.c_uint64).decode(struct.pack("<Q", 9)) == 9
    c = maps.codec(Pair)
    assert c.size == ctypes.sizeof(Pair) and c.decode(bytes(Pair(1, 2))).b == 2
    assert maps.codec(Bytes(3)).decode(b"abc") == b"abc"
    with pytest.raises(SizeError, match="Bytes"):
        maps.codec(3)
    with pytest.raises(SizeError):
        maps.codec("not a format!")
    with pytest.raises(SizeError, match="2 bytes"):
        maps.codec("u16").encode(70000)
    pc = maps.PerCpuCodec(maps.codec("u32"), 3)
    assert pc.size == 24
    assert pc.decode(pc.encode([1, 2, 3])) == [1, 2, 3]
    assert pc.decode(pc.encode(7)) == [7, 7, 7]
    assert pc.unpack_many(pc.encode([1, 2, 3]) * 2, 2) == [[1, 2, 3], [1, 2, 3]]


# ----------------------------------------------------------------- hash maps
@pytest.mark.kernel
def test_hash_round_trip(no_fd_leak):
    with HashMap("u32", "u64", 64, name="counts") as m:
        assert m.name == "counts" and m.key_size == 4 and m.value_size == 8
        assert m.map_type == MapType.HASH and m.max_entries == 64
        m[1] = 10
        m[2] = 2**64 - 1
        assert m[1] == 10 and m[2] == 2**64 - 1
        assert 1 in m and 3 not in m
        assert m.get(3) is None and m.get(3, "x") == "x"
        with pytest.raises(MapKeyError):
            m[3]
        with pytest.raises(KeyError):          # MapKeyError is a KeyError
            del m[3]
        assert sorted(m.items()) == [(1, 10), (2, 2**64 - 1)]
        assert sorted(m.keys()) == [1, 2] and sorted(m) == [1, 2]
        assert sorted(m.values()) == [10, 2**64 - 1]
        assert len(m) == 2
        assert m.pop(1) == 10 and m.pop(1, None) is None
        del m[2]
        assert len(m) == 0
        info = m.info()
        assert info.name == "counts" and info.type == MapType.HASH
        assert repr(info).startswith("MapInfo(type=1 (HASH), id=")   # (it said type=1)


@pytest.mark.kernel
def test_hash_update_flags(no_fd_leak):
    with HashMap(4, 4, 4) as m:
        m.set(1, 1, BPF_NOEXIST)
        with pytest.raises(KernelError) as ei:
            m.set(1, 2, BPF_NOEXIST)
        assert ei.value.errno == errno.EEXIST
        with pytest.raises(MapKeyError):
            m.set(2, 2, BPF_EXIST)
        assert m.setdefault(1, 5) == 1 and m.setdefault(3, 5) == 5


@pytest.mark.kernel
def test_hash_full(no_fd_leak):
    with HashMap(4, 4, 2) as m:
        m[1] = m[2] = 0
        with pytest.raises(MapFullError) as ei:
            m[3] = 0
        assert ei.value.errno == errno.E2BIG and "full" in str(ei.value)


@pytest.mark.kernel
def test_struct_formats_and_ctypes(no_fd_leak):
    with HashMap("<QI", "<II", 8) as m:
        m[(1, 2)] = (3, 4)
        assert m[(1, 2)] == (3, 4)
        assert m.items() == [((1, 2), (3, 4))]
        m.update({(5, 6): (7, 8)})
        assert m[(5, 6)] == (7, 8)
    with HashMap(ctypes.c_uint64, Pair, 8) as m:
        m[7] = Pair(1, 2)
        v = m[7]
        assert isinstance(v, Pair) and (v.a, v.b) == (1, 2)
        m[8] = (3, 4)                         # a tuple builds the Structure
        assert m[8].b == 4
        (k, v), = [kv for kv in m.items() if kv[0] == 8]
        assert v.a == 3
    with HashMap(Bytes(16), "s32", 8) as m:
        k = b"0123456789abcdef"
        m[k] = -5
        assert m[k] == -5 and list(m) == [k]


@pytest.mark.kernel
def test_batch_iteration_of_100k_entries(no_fd_leak):
    n = 100_000
    with HashMap("u32", "u64", n) as m:
        m.update({i: i * 3 for i in range(n)})
        items = m.items()
        assert len(items) == n
        d = dict(items)
        assert d[0] == 0 and d[n - 1] == (n - 1) * 3 and len(d) == n
        assert len(m) == n
        assert maps._BATCH_SUPPORT.get(MapType.HASH) is True
        m.clear()
        assert len(m) == 0


@pytest.mark.kernel
def test_get_next_key_fallback(monkeypatch, no_fd_leak):
    """When batch ops are missing, iteration falls back to GET_NEXT_KEY."""
    with HashMap("u32", "u32", 100) as m:
        m.update({i: i + 1 for i in range(50)})
        monkeypatch.setitem(maps._BATCH_SUPPORT, MapType.HASH, False)
        assert dict(m.items()) == {i: i + 1 for i in range(50)}
        m.update({100 + i: i for i in range(3)})
        assert len(m) == 53
        m.clear()
        assert m.items() == []


@pytest.mark.kernel
def test_lru_hash_evicts(no_fd_leak):
    with LruHashMap("u32", "u32", 64) as m:
        for i in range(1000):
            m[i] = i
        assert 0 < len(m) <= 64 + NCPU * 8      # LRU lists are per-CPU-ish
        assert m[999] == 999                    # the newest is still there
        assert m.map_type == MapType.LRU_HASH


# ------------------------------------------------------------------- arrays
@pytest.mark.kernel
def test_array(no_fd_leak):
    with ArrayMap("u64", 8, name="arr") as a:
        assert len(a) == 8 and list(a) == list(range(8))
        assert a[3] == 0
        a[3] = 42
        assert a[3] == 42 and a.values()[3] == 42
        assert dict(a.items())[3] == 42
        with pytest.raises(MapKeyError, match="out of range"):
            a[8] = 1
        with pytest.raises(MapKeyError):
            a[8]
        with pytest.raises(NotSupportedError):
            del a[3]
        a.update({0: 1, 7: 2})
        assert a.values() == [1, 0, 0, 42, 0, 0, 0, 2]
        a.clear()
        assert a.values() == [0] * 8


@pytest.mark.kernel
def test_percpu_array(no_fd_leak):
    with PerCpuArrayMap("u32", 4) as a:
        assert a.value_size == 4              # the kernel's per-CPU size
        assert a[0] == [0] * NCPU
        vals = list(range(1, NCPU + 1))
        a[1] = vals
        assert a[1] == vals
        a[2] = 5                              # one value for every CPU
        assert a[2] == [5] * NCPU and a.sum(2) == 5 * NCPU
        with pytest.raises(SizeError, match=f"{NCPU} items"):
            a[0] = [1] * (NCPU + 1)
        assert dict(a.items())[1] == vals


@pytest.mark.kernel
def test_percpu_hash_and_lru_percpu(no_fd_leak):
    for cls in (PerCpuHashMap, LruPerCpuHashMap):
        with cls("u32", "<HH", 16) as m:
            v = [(i, i + 1) for i in range(NCPU)]
            m[9] = v
            assert m[9] == v
            m.update({1: (1, 1)})
            assert dict(m.items()) == {9: v, 1: [(1, 1)] * NCPU}


@pytest.mark.kernel
def test_percpu_value_layout_is_8_byte_padded(no_fd_leak):
    with PerCpuHashMap("u32", "u32", 4) as m:
        m[0] = list(range(NCPU))
        raw = sc.map_lookup(m.fd, struct.pack("<I", 0), 8 * NCPU)
        assert [struct.unpack_from("<I", raw, 8 * i)[0] for i in range(NCPU)] == list(range(NCPU))


# --------------------------------------------------------------- queue/stack
@pytest.mark.kernel
def test_queue_fifo(no_fd_leak):
    with QueueMap("u32", 4) as q:
        for i in range(4):
            q.push(i)
        with pytest.raises(MapFullError):
            q.push(9)
        q.push(9, overwrite=True)             # drops the oldest
        assert q.peek() == 1
        assert [q.pop() for _ in range(4)] == [1, 2, 3, 9]
        with pytest.raises(MapKeyError, match="empty"):
            q.pop()
        assert q.pop(None) is None


@pytest.mark.kernel
def test_stack_lifo(no_fd_leak):
    with StackMap("<QQ", 8) as s:
        for i in range(3):
            s.push((i, i * 2))
        assert s.peek() == (2, 4)
        assert s.drain() == [(2, 4), (1, 2), (0, 0)]


# --------------------------------------------------------- special map types
@pytest.mark.kernel
def test_perf_event_array(no_fd_leak):
    from pyebpf.kernel import perf
    with PerfEventArray() as pa:
        assert pa.max_entries >= NCPU and pa.key_size == 4 and pa.value_size == 4
        with perf.open_bpf_output(0) as ev:
            pa[0] = ev
            del pa[0]
            with pytest.raises(MapKeyError):
                pa[pa.max_entries] = ev


@pytest.mark.kernel
def test_ringbuf(no_fd_leak):
    with RingBuf(4 * 4096) as rb:
        assert rb.size == 16384 and rb.info().type == MapType.RINGBUF
    with pytest.raises(SizeError, match="power of two"):
        RingBuf(3 * 4096)


@pytest.mark.kernel
def test_stack_trace_map(no_fd_leak):
    st = StackTraceMap(16, name="stacks")
    ins = lambda code, dst=0, src=0, off=0, imm=0: struct.pack("<BBhi", code, dst | src << 4, off, imm)  # noqa: E731
    prog = (ins(0x18, 2, 1, imm=st.fd) + ins(0) +      # r2 = map
            ins(0xB7, 3) +                             # r3 = 0 (kernel stack)
            ins(0x85, imm=27) +                        # call get_stackid
            ins(0xB7, 0) + ins(0x95))
    fd, _ = sc.prog_load(ProgType.RAW_TRACEPOINT, prog)
    with st, fd:
        sc.prog_test_run(fd)
        ids = st.keys()
        assert len(ids) == 1
        addrs = st[ids[0]]
        assert addrs and all(a >= 0xFFFF800000000000 for a in addrs)
        assert st.items() == [(ids[0], addrs)]
        with pytest.raises(NotSupportedError):
            st[0] = b""
        del st[ids[0]]
        assert st.keys() == []


# ---------------------------------------------------------------- size checks
@pytest.mark.kernel
def test_wrong_sizes_refused_before_any_syscall(monkeypatch, no_fd_leak):
    with HashMap("u32", "u64", 8) as m, HashMap(Bytes(8), Pair, 8) as b, \
            PerCpuArrayMap("u16", 2) as p:
        calls = []

        def no_syscall(*args):
            calls.append(args)
            raise AssertionError("a syscall was made")
        monkeypatch.setattr(mapops, "sys_bpf", no_syscall)
        monkeypatch.setattr(core, "sys_bpf", no_syscall)
        for slot in (s for each in (m, b, p) for s in each._pool):   # their fast path
            monkeypatch.setattr(slot, "raw_bpf", no_syscall)
        cases = [
            (lambda: m.__setitem__(2**32, 1), "u32"),
            (lambda: m.__getitem__(-1), "u32"),
            (lambda: m.__setitem__(1, 2**64), "u64"),
            (lambda: m.__setitem__(1, "x"), "u64"),
            (lambda: b.__setitem__(b"short", Pair()), "8 bytes"),
            (lambda: b.__getitem__(b"12345678901"), "8 bytes"),
            (lambda: b.__setitem__(b"12345678", ctypes.c_uint8(1)), f"{ctypes.sizeof(Pair)} bytes"),
            (lambda: p.__setitem__(0, [1] * (NCPU + 2)), f"{NCPU} items"),
            (lambda: p.__setitem__(0, 70000), "u16"),
            (lambda: m.update({1: 2, 2**40: 3}), "u32"),
        ]
        for fn, needle in cases:
            with pytest.raises(SizeError) as ei:
                fn()
            assert needle in str(ei.value)
        assert calls == []


@pytest.mark.kernel
def test_from_fd_checks_sizes(no_fd_leak):
    with HashMap("u32", "u64", 8) as m:
        with pytest.raises(SizeError, match="key_size is 4"):
            Map.from_fd(m.fd, key="u64")
        m[1] = 2
        with Map.from_fd(m.fd) as again:          # default codecs: ints by size
            assert isinstance(again, HashMap)
            assert again[1] == 2
        with Map.from_id(m.info().id, value="s64") as byid:
            assert byid[1] == 2
        with pytest.raises(NotSupportedError, match="not ARRAY"):
            ArrayMap.from_fd(m.fd)


# ----------------------------------------------------------------- pinning
@pytest.mark.kernel
def test_pin_from_pin_unpin(no_fd_leak):
    path = f"/sys/fs/bpf/pyebpf_test_{os.getpid()}"
    with PerCpuHashMap("u32", "u32", 8, name="pinned") as m:
        m[1] = 5
        m.pin(path)
        assert m.pinned == path and os.path.exists(path)
        try:
            with Map.from_pin(path, "u32", "u32") as again:
                assert isinstance(again, PerCpuHashMap) and again.name == "pinned"
                assert again[1] == [5] * NCPU
                again[2] = 1
            assert m[2] == [1] * NCPU
            with pytest.raises(KernelError) as ei:
                m.pin(path)
            assert ei.value.errno == errno.EEXIST
        finally:
            m.unpin()
        assert not os.path.exists(path) and m.pinned is None
    with pytest.raises(KernelError) as ei:
        Map.from_pin(path)
    assert ei.value.errno == errno.ENOENT and "nothing is pinned" in str(ei.value)


@pytest.mark.kernel
def test_pin_outside_bpffs_is_refused(tmp_path, no_fd_leak):
    with ArrayMap("u32", 1) as a, pytest.raises(PermissionDeniedError, match="bpf filesystem"):
        a.pin(str(tmp_path / "x"))


# ------------------------------------------------------------------- freeze
@pytest.mark.kernel
def test_freeze(no_fd_leak):
    with ArrayMap("u32", 2) as a:
        a[0] = 1
        a.freeze()
        assert a.frozen and a[0] == 1
        with pytest.raises(PermissionDeniedError, match="frozen"):
            a[0] = 2
        with pytest.raises(PermissionDeniedError):
            a.update({1: 1})
        assert a[0] == 1


# ----------------------------------------------------------------- lifetime
@pytest.mark.kernel
def test_close_is_idempotent_and_stops_use(no_fd_leak):
    m = HashMap("u32", "u32", 4)
    m[1] = 1
    m.close()
    m.close()
    assert m.closed
    with pytest.raises(KernelError) as ei:
        m.fd
    assert ei.value.errno == errno.EBADF
    other = ArrayMap("u32", 4)      # may reuse the fd number: must not be touched
    try:
        with pytest.raises(KernelError):
            m[0] = 7
        assert other[0] == 0
    finally:
        other.close()


@pytest.mark.kernel
@pytest.mark.parametrize("cls,args", [
    (HashMap, ("u32", "u32")), (ArrayMap, ("u32", 4)), (PerCpuHashMap, ("u32", "u32")),
    (PerCpuArrayMap, ("u32", 4)), (LruHashMap, ("u32", "u32")),
    (LruPerCpuHashMap, ("u32", "u32")), (PerfEventArray, ()), (RingBuf, (4096,)),
    (StackTraceMap, ()), (QueueMap, ("u32", 4)), (StackMap, ("u32", 4)),
])
def test_no_fd_left_open(cls, args, no_fd_leak):
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))
    base = fds()
    m = cls(*args)
    assert fds() == base + 1
    m.close()
    assert fds() == base
    with cls(*args):
        assert fds() == base + 1
    assert fds() == base
    m = cls(*args)
    del m
    gc.collect()
    assert fds() == base


@pytest.mark.kernel
def test_threads_share_a_map(no_fd_leak):
    with HashMap("u32", "u64", 1024) as m:
        errors = []

        def work(t: int) -> None:
            try:
                for i in range(2000):
                    k = t * 10000 + i % 100
                    m[k] = k * 2
                    assert m[k] == k * 2
            except BaseException as exc:       # pragma: no cover - reported below
                errors.append(exc)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(m) == 400


# ---------------------------------------------------------------- the kernel's limits
@pytest.mark.parametrize("make, words", [
    (lambda: HashMap("u64", "u64", 99999999999999), "max_entries must be 1..4294967295"),
    (lambda: HashMap("u64", "u64", 0), "max_entries must be 1"),
    (lambda: ArrayMap("u64", 1 << 32), "max_entries"),
    (lambda: ArrayMap("u64", 2.5), "must be an integer"),
    (lambda: HashMap("u64", "u64", 4, flags=1 << 40), "flags"),
    (lambda: PerCpuArrayMap(Bytes(32769), 1), "at most 32768 bytes"),
    (lambda: PerCpuHashMap("u64", Bytes(40000), 1), "at most 32768 bytes"),
    (lambda: RingBuf(1 << 40), "at most 2147483648"),
    (lambda: RingBuf(1 << 32), "at most 2147483648"),
    (lambda: maps.perf_ring_size(1 << 40), "2 GiB"),
    (lambda: maps.perf_ring_size(0), "2 GiB"),
])
def test_sizes_are_checked_before_the_system_call(make, words, no_fd_leak):
    """--buffer-size 2**40 / entries=99999999999999 gave an OverflowError."""
    with pytest.raises(SizeError, match=words):
        make()


@pytest.mark.kernel
def test_per_cpu_value_at_the_limit_is_created(no_fd_leak):
    with PerCpuArrayMap(Bytes(maps.PERCPU_VALUE_MAX), 1) as m:
        assert m.value_size == 32768
    assert maps.perf_ring_size(1) == os.sysconf("SC_PAGE_SIZE")
    assert maps.perf_ring_size(1 << 31) == 1 << 31


@pytest.mark.kernel
def test_map_spec_describes_without_creating(no_fd_leak):
    spec = maps.MapSpec(PerCpuHashMap, "u32", "<QQ", 64, name="described")
    assert (spec.name, spec.map_type, spec.key_size, spec.value_size, spec.max_entries) == \
        ("described", MapType.PERCPU_HASH, 4, 16, 64)
    from pyebpf.errors import MapError
    with pytest.raises(MapError, match="create"):
        spec.fd
    with pytest.raises(SizeError):
        maps.MapSpec(HashMap, "u64", "u64", 1 << 40)
    with spec.create() as m:
        assert m.info().name == "described" and m.info().max_entries == 64


# ------------------------------------------------------- MapOps fast path
@pytest.mark.kernel
def test_mapops_fast_path(no_fd_leak):
    """raw_bpf(*lookup_args/update_args) is the bare syscall; *_failed read the errno:
    False for an absent key (or BPF_EXIST on one), an exception otherwise."""
    with sc.map_create(MapType.HASH, 4, 8, 4) as fd:
        ops = mapops.MapOps(fd.fileno(), 4, 8)
        ops.key[:] = struct.pack("<I", 7)
        assert ops.raw_bpf(*ops.lookup_args) < 0 and ops.lookup_failed() is False
        ops.set_update_flags(BPF_EXIST)
        assert ops.update_flags == BPF_EXIST
        assert ops.raw_bpf(*ops.update_args) < 0 and ops.update_failed() is False
        ops.set_update_flags(BPF_NOEXIST)
        ops.value[:] = struct.pack("<Q", 99)
        assert ops.raw_bpf(*ops.update_args) == 0
        ops.value[:] = bytes(8)
        assert ops.raw_bpf(*ops.lookup_args) == 0 and struct.unpack("<Q", ops.value) == (99,)
        assert ops.raw_bpf(*ops.update_args) < 0
        with pytest.raises(KernelError) as ei:         # BPF_NOEXIST on a present key
            ops.update_failed()
        assert ei.value.errno == errno.EEXIST and ei.value.operation == "BPF_MAP_UPDATE_ELEM"
        ops.invalidate()
        assert ops.raw_bpf(*ops.lookup_args) < 0
        with pytest.raises(KernelError) as ei:
            ops.lookup_failed()
        assert ei.value.errno == errno.EBADF and ei.value.operation == "BPF_MAP_LOOKUP_ELEM"


def test_char_array_keys_and_values_are_strings(no_fd_leak):
    # as an asm header's char[N]: a str in, a str out (up to the first NUL)
    with HashMap("char[16]", "char[8]", 4, name="comms") as m:
        assert m.key_size == 16 and m.value_size == 8
        m["bash"] = "sh"
        m[b"python3"] = "py"
        assert dict(m.items()) == {"bash": "sh", "python3": "py"}
        assert m["bash"] == "sh"
        with pytest.raises(SizeError, match=r"does not fit char\[8\] \(9 bytes, at most 8\)"):
            m["x"] = "123456789"
        from pyebpf.errors import WrongTypeError
        with pytest.raises(WrongTypeError, match=r"wrong type for char\[16\]: an int, not a str"):
            m[3] = "x"
    assert maps.codec("char[4]").decode(b"ab\0c") == "ab"


def test_a_key_of_the_wrong_type_says_so(no_fd_leak):
    from pyebpf.errors import WrongTypeError
    with HashMap("u32", "u64", 4, name="typed") as m:
        for action in (lambda: m.__setitem__("abc", 1), lambda: m["abc"],
                       lambda: m.__setitem__(1.5, 1)):
            with pytest.raises(WrongTypeError) as ei:
                action()
            text = str(ei.value)
            assert "has the wrong type for u32" in text and "memoryview" not in text, text
            assert isinstance(ei.value, TypeError) and isinstance(ei.value, SizeError)
        with pytest.raises(WrongTypeError, match="value 'x' has the wrong type for u64: a str"):
            m[1] = "x"
        with pytest.raises(SizeError, match=r"key 4294967296 does not fit u32 "
                                            r"\(4 bytes: 0 to 4294967295\)$"):
            m[1 << 32] = 1


@pytest.mark.parametrize("index", [7, -1])
def test_array_reads_and_writes_out_of_range_say_the_same(no_fd_leak, index):
    # (a negative index: the read said "key -1 does not fit u32", a SizeError)
    with ArrayMap("u64", 4, name="four") as m:
        said = []
        for action in (lambda: m[index], lambda: m.__setitem__(index, 1)):
            with pytest.raises(MapKeyError) as ei:
                action()
            said.append(str(ei.value))
        assert said[0] == said[1] == f"index {index} is out of range for array map 'four' " \
                                     "(max_entries 4)"
        assert m.get(index) is None and m.get(index, 5) == 5 and index not in m
