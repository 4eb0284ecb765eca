"""Feature probes: ask the running kernel what it supports (results are cached).

Each probe returns a :class:`Feature`, which is truthy when supported and
always carries a ``reason`` (useful as ``pytest.skip(feature.reason)``).  The
probes create and close tiny objects; they never attach anything.
"""
from __future__ import annotations


import errno as E
import functools
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .ffi import CData

from ..errors import KernelError, VerifierError
from .constants import (BPF_F_MMAPABLE, BPF_F_NO_PREALLOC, BPF_F_SLEEPABLE, AttachType, Cmd,
                        MapType, ProgType, enum_name)
from .core import Fd, addr, attr_size, new_attr, try_bpf
from .ffi import ffi
from .mapops import BatchOps, map_create
from .perf import EVENT_SOURCE_DIR, kprobe_pmu_type, uprobe_pmu_type
from .btfprobe import BTF_FUNC_GLOBAL, BTF_KINDS, btf_func_global_probe, btf_kind_probe
from .prog import prog_load
# (the kernel's version is in .version, for the paths that need no probe)
from .version import kernel_version, kernel_version_code
from .._record import Record, record

__all__ = ["Feature", "kernel_version", "kernel_version_code", "has_map_type",
           "has_prog_type", "has_helper", "has_perf_link", "has_uprobe_multi",
           "has_kprobe_pmu", "has_uprobe_pmu", "has_bpf_cookie", "has_map_batch",
           "RETURN_ZERO", "has_btf_kind", "has_btf_func_global", "BTF_KINDS"]

#: ``r0 = 0; exit`` -- the smallest valid program.
RETURN_ZERO = b"\xb7\x00\x00\x00\x00\x00\x00\x00\x95\x00\x00\x00\x00\x00\x00\x00"


@record
class Feature(Record):
    """The answer of a probe: ``supported`` and, either way, why."""

    name: str
    supported: bool
    reason: str

    def __bool__(self) -> bool:
        return self.supported


def _yes(name: str, reason: str) -> Feature:
    return Feature(name, True, reason)


def _no(name: str, reason: str) -> Feature:
    return Feature(name, False, reason)


# ---------------------------------------------------------------- map types
_PAGE = os.sysconf("SC_PAGE_SIZE")

# (key_size, value_size, max_entries, flags) the kernel accepts for each type,
# grouped by what they take; any other type gets (4, 8, 1, 0)
_MAP_PARAMS: dict[int, tuple[int, int, int, int]] = {
    **dict.fromkeys((MapType.RINGBUF, MapType.USER_RINGBUF), (0, 0, _PAGE, 0)),
    **dict.fromkeys((MapType.QUEUE, MapType.STACK, MapType.BLOOM_FILTER), (0, 4, 1, 0)),
    **dict.fromkeys((MapType.PERF_EVENT_ARRAY, MapType.PROG_ARRAY, MapType.CGROUP_ARRAY,
                     MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS, MapType.DEVMAP,
                     MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.XSKMAP, MapType.SOCKMAP,
                     MapType.SOCKHASH, MapType.REUSEPORT_SOCKARRAY), (4, 4, 1, 0)),
    **dict.fromkeys((MapType.CGROUP_STORAGE, MapType.PERCPU_CGROUP_STORAGE), (16, 8, 0, 0)),
    MapType.STACK_TRACE: (4, 8, 1, 0),
    MapType.LPM_TRIE: (8, 4, 1, BPF_F_NO_PREALLOC),
    MapType.ARENA: (0, 0, 1, BPF_F_MMAPABLE),
}
_NEEDS_BTF_MAPS = {MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE,
                   MapType.CGRP_STORAGE, MapType.STRUCT_OPS}


@functools.lru_cache(maxsize=None)
def has_map_type(map_type: int) -> Feature:
    """Can a map of this type be created?  (Tries a minimal one.)"""
    name = f"map type {enum_name(MapType, map_type)}"
    if map_type in _NEEDS_BTF_MAPS:
        return _no(name, f"{name} needs BTF type information to be created; "
                         "pyebpf cannot probe it")
    key, value, entries, flags = _MAP_PARAMS.get(map_type, (4, 8, 1, 0))
    inner = None
    try:
        if map_type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            inner = map_create(MapType.ARRAY, 4, 4, 1)
        fd = map_create(map_type, key, value, entries, flags=flags,
                        inner_map_fd=inner.fileno() if inner else 0,
                        map_extra=0)
    except KernelError as exc:
        return _no(name, f"{name} is not available: {str(exc.strerror).splitlines()[0]}")
    finally:
        if inner is not None:
            inner.close()
    fd.close()
    return _yes(name, f"{name} can be created")


# --------------------------------------------------------------- prog types
_PROG_EXPECTED_ATTACH = {
    ProgType.CGROUP_SOCK_ADDR: AttachType.CGROUP_INET4_CONNECT,
    ProgType.SK_LOOKUP: AttachType.SK_LOOKUP,
    ProgType.CGROUP_SOCKOPT: AttachType.CGROUP_GETSOCKOPT,
    ProgType.NETFILTER: AttachType.NETFILTER,
}
_NEEDS_BTF_PROGS = {ProgType.TRACING, ProgType.EXT, ProgType.LSM, ProgType.STRUCT_OPS}


def _probe_load(prog_type: int, insns: bytes = RETURN_ZERO,
                expected_attach_type: int = 0) -> tuple[Fd | None, KernelError | None]:
    """Load a probe program; returns ``(fd or None, exception or None)``."""
    flags = BPF_F_SLEEPABLE if prog_type == ProgType.SYSCALL else 0
    try:
        fd, _ = prog_load(prog_type, insns, "GPL", expected_attach_type=expected_attach_type,
                          prog_flags=flags, log_level=1, log_size=4096)
    except KernelError as exc:
        return None, exc
    return fd, None


@functools.lru_cache(maxsize=None)
def has_prog_type(prog_type: int) -> Feature:
    """Can a program of this type be loaded?  (Loads ``r0 = 0; exit``.)"""
    name = f"program type {enum_name(ProgType, prog_type)}"
    if prog_type in _NEEDS_BTF_PROGS:
        return _no(name, f"{name} needs a BTF attach target to load; pyebpf cannot probe it")
    fd, exc = _probe_load(prog_type, RETURN_ZERO, _PROG_EXPECTED_ATTACH.get(prog_type, 0))
    if fd is None:
        return _no(name, f"{name} cannot be loaded: {str(exc).splitlines()[0]}")
    fd.close()
    return _yes(name, f"{name} can be loaded")


# ------------------------------------------------------------------ helpers
@functools.lru_cache(maxsize=None)
def has_helper(prog_type: int, helper_id: int) -> Feature:
    """Does this kernel have helper ``helper_id``, usable from ``prog_type``?

    Loads ``call helper_id; r0 = 0; exit``.  An unknown helper is rejected with
    ``invalid func unknown#N``; one this program type may not call with
    ``program of this type cannot use helper``; anything else (typically a
    complaint about the arguments) means the helper exists for this type.
    """
    name = f"helper #{helper_id} for {enum_name(ProgType, prog_type)}"
    pt = has_prog_type(prog_type)
    if not pt:
        return _no(name, pt.reason)
    insns = (struct.pack("<BBhi", 0x85, 0, 0, helper_id) + RETURN_ZERO)
    fd, exc = _probe_load(prog_type, insns, _PROG_EXPECTED_ATTACH.get(prog_type, 0))
    if fd is not None:
        fd.close()
        return _yes(name, f"{name} is available")
    if isinstance(exc, VerifierError):
        log = exc.log
        if "invalid func unknown#" in log or "unknown func" in log:
            return _no(name, f"this kernel does not know helper #{helper_id} "
                             f"({exc.message})")
        if "cannot use helper" in log or "cannot call" in log:
            return _no(name, f"{enum_name(ProgType, prog_type)} programs cannot use helper "
                             f"#{helper_id} ({exc.message})")
        return _yes(name, f"{name} is available (the probe's arguments were refused: "
                          f"{exc.message})")
    return _no(name, f"probe failed: {str(exc).splitlines()[0]}")


# -------------------------------------------------------------------- links
def _link_probe(name: str, prog_kw: dict[str, int], link_setup: Callable[[CData, int], object],
                size: int) -> Feature:
    fd, exc = _probe_load(ProgType.KPROBE, RETURN_ZERO, **prog_kw)
    if fd is None:
        return _no(name, f"the probe program could not be loaded: "
                         f"{str(exc).splitlines()[0]}")
    try:
        attr = new_attr()
        keep = link_setup(attr, fd.fileno())
        ret = try_bpf(Cmd.LINK_CREATE, attr, size)
        del keep
    finally:
        fd.close()
    if ret >= 0:
        Fd(ret).close()
        return _yes(name, f"{name}: BPF_LINK_CREATE accepted the probe")
    if ret == -E.EBADF:
        return _yes(name, f"{name}: BPF_LINK_CREATE knows the attach type (EBADF on the "
                          "dummy target)")
    return _no(name, f"{name}: BPF_LINK_CREATE refused the attach type "
                     f"({E.errorcode.get(-ret, -ret)}; needs a newer kernel)")


@functools.lru_cache(maxsize=None)
def has_perf_link() -> Feature:
    """Can programs be attached to perf events with BPF links (Linux 5.15+)?"""
    def setup(attr: CData, prog_fd: int) -> None:
        attr.link_create.prog_fd = prog_fd
        attr.link_create.target_fd = 0
        attr.link_create.attach_type = AttachType.PERF_EVENT
        return None
    return _link_probe("perf event links", {}, setup,
                       attr_size("link_create", "perf_event", "bpf_cookie"))


@functools.lru_cache(maxsize=None)
def has_uprobe_multi() -> Feature:
    """Is BPF_TRACE_UPROBE_MULTI available (Linux 6.6+)?"""
    def setup(attr: CData, prog_fd: int) -> tuple[CData, CData]:
        path = ffi.new("char[]", b"/")
        offs = ffi.new("uint64_t[1]")
        lc = attr.link_create
        lc.prog_fd = prog_fd
        lc.attach_type = AttachType.TRACE_UPROBE_MULTI
        lc.uprobe_multi.path = addr(path)
        lc.uprobe_multi.offsets = addr(offs)
        lc.uprobe_multi.cnt = 1
        return path, offs
    return _link_probe("uprobe_multi links",
                       {"expected_attach_type": AttachType.TRACE_UPROBE_MULTI}, setup,
                       attr_size("link_create", "uprobe_multi", "pid"))


# -------------------------------------------------------------------- PMUs
@functools.lru_cache(maxsize=None)
def has_kprobe_pmu() -> Feature:
    """Is there a ``kprobe`` PMU (perf_event_open-based kprobes)?"""
    t = kprobe_pmu_type()
    if t is None:
        return _no("kprobe PMU", f"no kprobe PMU: {EVENT_SOURCE_DIR}/kprobe is missing "
                                 "(the kernel is built without CONFIG_KPROBES / "
                                 "CONFIG_KPROBE_EVENTS, so kprobes cannot be used)")
    return _yes("kprobe PMU", f"kprobe PMU type {t}")


@functools.lru_cache(maxsize=None)
def has_uprobe_pmu() -> Feature:
    """Is there a ``uprobe`` PMU (perf_event_open-based uprobes, Linux 4.17+)?"""
    t = uprobe_pmu_type()
    if t is None:
        return _no("uprobe PMU", f"no uprobe PMU: {EVENT_SOURCE_DIR}/uprobe is missing "
                                 "(CONFIG_UPROBE_EVENTS off or a kernel older than 4.17)")
    return _yes("uprobe PMU", f"uprobe PMU type {t}")


@functools.lru_cache(maxsize=None)
def has_bpf_cookie() -> Feature:
    """Can a program read a per-attachment cookie (``bpf_get_attach_cookie``, 5.15+)?"""
    helper = has_helper(ProgType.KPROBE, 174)
    if not helper:
        return _no("bpf cookie", helper.reason)
    link = has_perf_link()
    if not link:
        return _no("bpf cookie", "bpf_get_attach_cookie exists but perf links (which "
                                 "carry the cookie) do not: " + link.reason)
    return _yes("bpf cookie", "bpf_get_attach_cookie and perf links are available")


@functools.lru_cache(maxsize=None)
def has_map_batch() -> Feature:
    """Do BPF_MAP_*_BATCH commands work (Linux 5.6+)?"""
    try:
        fd = map_create(MapType.HASH, 4, 4, 1)
    except KernelError as exc:
        return _no("map batch ops", f"cannot create a hash map: {exc}")
    try:
        ops = BatchOps(fd.fileno(), 4, 4, 1)
        ops.lookup(True)
    except KernelError as exc:
        return _no("map batch ops", f"BPF_MAP_LOOKUP_BATCH failed: "
                                    f"{str(exc.strerror).splitlines()[0]}")
    finally:
        fd.close()
    return _yes("map batch ops", "BPF_MAP_LOOKUP_BATCH works")



@functools.lru_cache(maxsize=None)
def has_btf_kind(kind: int) -> Feature:
    """Does the kernel's BTF loader take this kind (one of :data:`BTF_KINDS`:
    15 DATASEC, 16 FLOAT, 17 DECL_TAG, 18 TYPE_TAG, 19 ENUM64)?  Asked with
    a small blob holding one, as libbpf's feature probes do (see
    :mod:`.btfprobe`, which the object loader asks)."""
    ok, why = btf_kind_probe(kind)          # (an unknown kind: OptionError)
    return Feature(BTF_KINDS[kind][0], ok, why)


@functools.lru_cache(maxsize=None)
def has_btf_func_global() -> Feature:
    """Does the kernel's BTF loader take a FUNC of global linkage (Linux 5.6+;
    before, only static)?"""
    return Feature(BTF_FUNC_GLOBAL[0], *btf_func_global_probe())
