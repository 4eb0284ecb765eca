"""Map commands: create, element operations, freeze, and the batch commands.

:class:`MapOps` and :class:`BatchOps` hold pre-built attrs and buffers for one
map, so that the dict-like API of :mod:`pyebpf.maps` allocates nothing per
call; ``ops.raw_bpf(*ops.lookup_args)`` (or ``update_args``) is the fast path
(the bare syscall on the prepared attr).  The conventions are those of :mod:`.core`.
"""
from __future__ import annotations

import errno as E

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable

    from .ffi import CData

from ..errors import KernelError, SizeError
from .constants import BPF_ANY, Cmd, MapType, enum_name
from .core import (RETRIES, Fd, addr, as_fd, attr_size, buf, kernel_error, new_attr,
                   obj_name, try_bpf)
from .ffi import NR_BPF, ffi, sys_bpf

__all__ = ["map_create", "map_lookup", "map_update", "map_delete", "map_get_next_key",
           "map_lookup_and_delete", "map_freeze", "map_lookup_batch", "map_update_batch",
           "map_delete_batch", "MapOps", "BatchOps"]

_SZ_MAP_CREATE = attr_size("map_create", "map_extra")
#: the attr size of every element command
SZ_ELEM = attr_size("elem", "flags")
_SZ_BATCH = attr_size("batch", "flags")
_LOOKUP = int(Cmd.MAP_LOOKUP_ELEM)
_UPDATE = int(Cmd.MAP_UPDATE_ELEM)
_DELETE = int(Cmd.MAP_DELETE_ELEM)
_NEXT_KEY = int(Cmd.MAP_GET_NEXT_KEY)
_LOOKUP_DELETE = int(Cmd.MAP_LOOKUP_AND_DELETE_ELEM)


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, *,
               flags: int = 0, name: str = "", inner_map_fd: int = 0,
               numa_node: int | None = None, map_extra: int = 0, btf_fd: int = 0,
               btf_key_type_id: int = 0, btf_value_type_id: int = 0,
               map_ifindex: int = 0) -> Fd:
    """BPF_MAP_CREATE.  Returns the map's :class:`Fd`.

    ``numa_node`` sets BPF_F_NUMA_NODE.  Raises :class:`NotSupportedError` when
    the kernel rejects the type or the sizes (EINVAL), with the reason spelled out.
    """
    attr = new_attr()
    mc = attr.map_create
    mc.map_type = map_type
    mc.key_size = key_size
    mc.value_size = value_size
    mc.max_entries = max_entries
    mc.map_flags = flags | (4 if numa_node is not None else 0)
    mc.inner_map_fd = as_fd(inner_map_fd)
    mc.numa_node = numa_node or 0
    nm = obj_name(name)
    ffi.memmove(mc.map_name, nm, len(nm))
    mc.map_ifindex = map_ifindex
    mc.btf_fd = btf_fd
    mc.btf_key_type_id = btf_key_type_id
    mc.btf_value_type_id = btf_value_type_id
    mc.map_extra = map_extra
    ret = try_bpf(Cmd.MAP_CREATE, attr, _SZ_MAP_CREATE)
    if ret < 0:
        tname = enum_name(MapType, map_type)
        raise kernel_error("BPF_MAP_CREATE", -ret,
                           f"map type {tname} ({map_type}), key_size={key_size}, "
                           f"value_size={value_size}, max_entries={max_entries}, "
                           f"flags={flags:#x}", tname=tname)
    return Fd(ret)


def _elem_attr(fd: int, key_cd: CData, value_cd: CData, flags: int) -> CData:
    attr = new_attr()
    el = attr.elem
    el.map_fd = fd
    el.key = addr(key_cd) if key_cd is not None else 0
    el.value = addr(value_cd) if value_cd is not None else 0
    el.flags = flags
    return attr


def _map_elem_error(cmd: int, err: int, fd: int) -> KernelError:
    return kernel_error(cmd, err, f"map fd {fd}", fd=fd)


def _elem(cmd: int, fd: "int | Fd", key: bytes | None, *, out: int | None = None,
          value: bytes | None = None, flags: int = 0) -> bytes | bool:
    """One element command.  With ``out``: the bytes the kernel wrote into a
    fresh buffer of that size; else True.  False when the kernel says ENOENT."""
    fdn = as_fd(fd)
    kb = buf(key)
    ob = bytearray(out) if out is not None else None
    data = ob if ob is not None else value
    vcd = ffi.from_buffer(data) if data is not None else None
    ret = try_bpf(cmd, _elem_attr(fdn, kb, vcd, flags), SZ_ELEM)
    if ret < 0:
        if ret == -E.ENOENT:
            return False
        raise _map_elem_error(cmd, -ret, fdn)
    return bytes(ob) if ob is not None else True


def map_lookup(fd: "int | Fd", key: bytes | None, value_size: int, flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_ELEM: the value bytes (``value_size`` long), or None if absent.

    ``key`` is None for queue/stack maps (peek).  For per-CPU maps
    ``value_size`` must be ``round_up(value_size, 8) * num_possible_cpus()``.
    """
    got = _elem(Cmd.MAP_LOOKUP_ELEM, fd, key, out=value_size, flags=flags)
    return got if isinstance(got, bytes) else None


def map_update(fd: "int | Fd", key: bytes | None, value: bytes, flags: int = BPF_ANY) -> None:
    """BPF_MAP_UPDATE_ELEM (``key`` None for queue/stack push)."""
    if not _elem(Cmd.MAP_UPDATE_ELEM, fd, key, value=value, flags=flags):
        raise _map_elem_error(Cmd.MAP_UPDATE_ELEM, E.ENOENT, as_fd(fd))  # BPF_EXIST, absent


def map_delete(fd: "int | Fd", key: bytes) -> bool:
    """BPF_MAP_DELETE_ELEM; False if the key was absent."""
    return _elem(Cmd.MAP_DELETE_ELEM, fd, key) is True


def map_get_next_key(fd: "int | Fd", key: bytes | None, key_size: int) -> bytes | None:
    """BPF_MAP_GET_NEXT_KEY: the key after ``key`` (None: the first), or None at the end."""
    got = _elem(Cmd.MAP_GET_NEXT_KEY, fd, key, out=key_size)
    return got if isinstance(got, bytes) else None


def map_lookup_and_delete(fd: "int | Fd", key: bytes | None, value_size: int,
                          flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_AND_DELETE_ELEM (queue/stack pop with ``key`` None); None if empty/absent."""
    got = _elem(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, fd, key, out=value_size, flags=flags)
    return got if isinstance(got, bytes) else None


def map_freeze(fd: "int | Fd") -> None:
    """BPF_MAP_FREEZE: make the map read-only from user space, for good."""
    fd = as_fd(fd)
    attr = new_attr()
    attr.elem.map_fd = fd
    ret = try_bpf(Cmd.MAP_FREEZE, attr, SZ_ELEM)
    if ret < 0:
        raise kernel_error("BPF_MAP_FREEZE", -ret, f"map fd {fd}")


class MapOps:
    """Pre-allocated attrs and buffers for fast element operations on one map.

    The caller packs the key into :attr:`key` (a bytearray of ``key_size``),
    calls an operation, and reads the value from :attr:`value`.  Nothing is
    allocated per call.  Not thread-safe: the owner serialises calls.

    Operations return True on success and False when the kernel says ENOENT
    (absent key, empty queue, end of iteration); other errors raise.

    The fast path for the hottest two: ``ops.raw_bpf(*ops.lookup_args)`` (and
    ``update_args``) is the bare bpf() call on the prepared attr, with no
    Python frame in between (as fast as calling the C function directly; a
    method or a ``functools.partial`` costs 2-4% of a lookup).  It returns the
    kernel's result; when that is negative, call :meth:`lookup_failed` /
    :meth:`update_failed` at once (they read the errno): ::

        if ops.raw_bpf(*ops.lookup_args) < 0 and not ops.lookup_failed():
            ...  # absent
    """

    __slots__ = ("fd", "key_size", "value_size", "key", "value", "next_key",
                 "raw_bpf", "lookup_args", "update_args", "update_flags",
                 "_kcd", "_vcd", "_ncd", "_attrs", "_a_lookup", "_a_update",
                 "_a_delete", "_a_next", "_a_first", "_a_lookup_del", "_update_el")

    def __init__(self, fd: int, key_size: int, value_size: int) -> None:
        self.fd = fd
        self.key_size = key_size
        self.value_size = value_size
        self.key = bytearray(key_size)
        self.value = bytearray(value_size)
        self.next_key = bytearray(key_size)
        self._kcd = ffi.from_buffer(self.key) if key_size else None
        self._vcd = ffi.from_buffer(self.value) if value_size else None
        self._ncd = ffi.from_buffer(self.next_key) if key_size else None
        k = addr(self._kcd) if key_size else 0
        v = addr(self._vcd) if value_size else 0
        n = addr(self._ncd) if key_size else 0
        self._attrs = attrs = ffi.new("union bpf_attr[6]")
        for i, (kk, vv) in enumerate(((k, v), (k, v), (k, 0), (k, n), (0, n), (k, v))):
            el = attrs[i].elem
            el.map_fd = fd
            el.key = kk
            el.value = vv
        self._a_lookup = attrs + 0
        self._a_update = attrs + 1
        self._update_el = attrs[1].elem
        self._a_delete = attrs + 2
        self._a_next = attrs + 3
        self._a_first = attrs + 4
        self._a_lookup_del = attrs + 5
        #: the flags the next update passes (change with :meth:`set_update_flags`)
        self.update_flags = BPF_ANY
        #: the C function (``syscall(2)`` typed for bpf()) the ``*_args`` are for
        self.raw_bpf = sys_bpf
        #: ``raw_bpf(*lookup_args)``: BPF_MAP_LOOKUP_ELEM of :attr:`key` into :attr:`value`
        self.lookup_args = (NR_BPF, _LOOKUP, self._a_lookup, SZ_ELEM)
        #: ``raw_bpf(*update_args)``: BPF_MAP_UPDATE_ELEM of :attr:`key`, :attr:`value`
        self.update_args = (NR_BPF, _UPDATE, self._a_update, SZ_ELEM)

    def invalidate(self) -> None:
        """Point every attr at an impossible fd (after the map's fd is closed,
        its number may be reused by another object)."""
        for i in range(6):
            self._attrs[i].elem.map_fd = 0xFFFFFFFF

    def set_update_flags(self, flags: int) -> None:
        """Make the following updates pass ``flags`` (BPF_ANY/NOEXIST/EXIST, BPF_F_LOCK)."""
        self._update_el.flags = self.update_flags = flags

    def _fail(self, cmd: int, attr: CData) -> bool:
        err = ffi.errno
        tries = 0
        while err in (E.EAGAIN, E.EINTR) and tries < RETRIES:
            tries += 1
            if sys_bpf(NR_BPF, cmd, attr, SZ_ELEM) >= 0:
                return True
            err = ffi.errno
        if err == E.ENOENT:
            return False
        raise _map_elem_error(cmd, err, self.fd)

    def lookup_failed(self) -> bool:
        """After ``raw_bpf(*lookup_args)`` < 0: retry EAGAIN/EINTR (True: it worked then),
        False for an absent key, else raise."""
        return self._fail(_LOOKUP, self._a_lookup)

    def update_failed(self) -> bool:
        """After ``raw_bpf(*update_args)`` < 0: retry EAGAIN/EINTR (True: it worked then),
        False for ENOENT (BPF_EXIST and the key is absent), else raise."""
        return self._fail(_UPDATE, self._a_update)

    def lookup(self) -> bool:
        """Look up :attr:`key`; the value lands in :attr:`value`."""
        if sys_bpf(*self.lookup_args) < 0:
            return self._fail(_LOOKUP, self._a_lookup)
        return True

    def update(self, flags: int = BPF_ANY) -> bool:
        """Store :attr:`value` under :attr:`key` (False: BPF_EXIST and key absent)."""
        if flags != self.update_flags:
            self.set_update_flags(flags)
        if sys_bpf(*self.update_args) < 0:
            return self._fail(_UPDATE, self._a_update)
        return True

    def delete(self) -> bool:
        """Delete :attr:`key` (False: absent)."""
        if sys_bpf(NR_BPF, _DELETE, self._a_delete, SZ_ELEM) < 0:
            return self._fail(_DELETE, self._a_delete)
        return True

    def next(self, first: bool = False) -> bool:
        """Put the key after :attr:`key` (or the first key) in :attr:`next_key`."""
        a = self._a_first if first else self._a_next
        if sys_bpf(NR_BPF, _NEXT_KEY, a, SZ_ELEM) < 0:
            return self._fail(_NEXT_KEY, a)
        return True

    def lookup_and_delete(self) -> bool:
        """Pop :attr:`key` (or the head of a queue/stack) into :attr:`value`."""
        if sys_bpf(NR_BPF, _LOOKUP_DELETE, self._a_lookup_del, SZ_ELEM) < 0:
            return self._fail(_LOOKUP_DELETE, self._a_lookup_del)
        return True


class BatchOps:
    """Buffers and attr for the BPF_MAP_*_BATCH commands on one map.

    :attr:`keys` and :attr:`values` hold up to :attr:`count` packed entries.
    ``value_size`` is the per-entry size as the kernel copies it (per-CPU maps:
    ``round_up(value_size, 8) * num_possible_cpus()``).
    """

    __slots__ = ("fd", "key_size", "value_size", "count", "keys", "values",
                 "_kcd", "_vcd", "_tok", "_tokcd", "_attr", "_b")

    def __init__(self, fd: int, key_size: int, value_size: int, count: int) -> None:
        self.fd = fd
        self.key_size = key_size
        self.value_size = value_size
        self._alloc(count)
        tsz = max(key_size, 8)
        self._tok = [bytearray(tsz), bytearray(tsz)]
        self._tokcd = [ffi.from_buffer(t) for t in self._tok]
        self._attr = new_attr()
        self._b = self._attr.batch
        self._b.map_fd = fd

    def _alloc(self, count: int) -> None:
        self.count = count
        self.keys = bytearray(self.key_size * count)
        self.values = bytearray(self.value_size * count)
        self._kcd = ffi.from_buffer(self.keys)
        self._vcd = ffi.from_buffer(self.values)

    def _call(self, cmd: int) -> int:
        return try_bpf(cmd, self._attr, _SZ_BATCH)

    def _error(self, cmd: int, err: int, done: int, total: int) -> KernelError:
        return kernel_error(cmd, err, f"map fd {self.fd}, after {done} of {total} elements",
                            fd=self.fd)

    def lookup(self, first: bool, delete: bool = False, elem_flags: int = 0) -> tuple[int, bool]:
        """Fetch the next chunk into :attr:`keys`/:attr:`values`.

        ``first`` starts from the beginning of the map.  Returns ``(n, done)``:
        ``n`` entries were copied; ``done`` is True at the end of the map.
        Grows the buffers by itself when a hash bucket does not fit (ENOSPC).
        """
        cmd = Cmd.MAP_LOOKUP_AND_DELETE_BATCH if delete else Cmd.MAP_LOOKUP_BATCH
        b = self._b
        while True:
            b.in_batch = 0 if first else addr(self._tokcd[0])
            b.out_batch = addr(self._tokcd[1])
            b.keys = addr(self._kcd)
            b.values = addr(self._vcd)
            b.count = self.count
            b.elem_flags = elem_flags
            b.flags = 0
            ret = self._call(cmd)
            n = b.count
            if ret >= 0:
                self._tok.reverse()
                self._tokcd.reverse()
                return n, False
            if ret == -E.ENOENT:
                return n, True
            if ret == -E.ENOSPC and n == 0 and self.count < (1 << 24):
                self._alloc(self.count * 2)
                continue
            raise self._error(cmd, -ret, 0, self.count)

    def update(self, n: int, elem_flags: int = BPF_ANY) -> None:
        """Write the first ``n`` packed entries of :attr:`keys`/:attr:`values`."""
        self._run(Cmd.MAP_UPDATE_BATCH, n, elem_flags, with_values=True)

    def delete(self, n: int) -> int:
        """Delete the first ``n`` keys of :attr:`keys`; returns how many were deleted.

        Keys that are absent are skipped (they do not stop the batch).
        """
        return self._run(Cmd.MAP_DELETE_BATCH, n, 0, with_values=False)

    def _run(self, cmd: int, n: int, elem_flags: int, with_values: bool) -> int:
        b = self._b
        done = 0
        deleted = 0
        ks, vs = self.key_size, self.value_size
        while done < n:
            b.in_batch = 0
            b.out_batch = 0
            b.keys = addr(self._kcd) + done * ks
            b.values = (addr(self._vcd) + done * vs) if with_values else 0
            b.count = n - done
            b.elem_flags = elem_flags
            b.flags = 0
            ret = self._call(cmd)
            got: int = b.count
            if ret >= 0:
                return deleted + got
            err = -ret
            if cmd == Cmd.MAP_DELETE_BATCH and err == E.ENOENT:
                deleted += got
                done += got + 1          # skip the absent key and go on
                continue
            raise self._error(cmd, err, done + got, n)
        return deleted


def map_lookup_batch(fd: "int | Fd", key_size: int, value_size: int,
                     chunk: int = 4096) -> Iterable[tuple[bytes, bytes]]:
    """Yield every ``(key, value)`` of a map with BPF_MAP_LOOKUP_BATCH (raw bytes)."""
    ops = BatchOps(as_fd(fd), key_size, value_size, chunk)
    first, done = True, False
    while not done:
        n, done = ops.lookup(first)
        first = False
        for i in range(n):
            yield (bytes(ops.keys[i * key_size:(i + 1) * key_size]),
                   bytes(ops.values[i * value_size:(i + 1) * value_size]))


def map_update_batch(fd: "int | Fd", keys: bytes, values: bytes, count: int,
                     key_size: int, value_size: int, elem_flags: int = BPF_ANY) -> None:
    """BPF_MAP_UPDATE_BATCH of ``count`` packed keys and values."""
    if len(keys) != count * key_size or len(values) != count * value_size:
        raise SizeError(f"expected {count} keys of {key_size} bytes and values of "
                        f"{value_size} bytes, got {len(keys)} and {len(values)} bytes")
    ops = BatchOps(as_fd(fd), key_size, value_size, count)
    ops.keys[:] = keys
    ops.values[:] = values
    ops.update(count, elem_flags)


def map_delete_batch(fd: "int | Fd", keys: bytes, count: int, key_size: int) -> int:
    """BPF_MAP_DELETE_BATCH of ``count`` packed keys; returns how many were deleted."""
    if len(keys) != count * key_size:
        raise SizeError(f"expected {count} keys of {key_size} bytes, got {len(keys)} bytes")
    ops = BatchOps(as_fd(fd), key_size, 0, count)
    ops.keys[:] = keys
    return ops.delete(count)


