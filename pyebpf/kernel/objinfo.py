"""What the kernel tells about its objects: BPF_OBJ_GET_INFO_BY_FD, ids, stats.

Records for programs, maps and links (:class:`ProgInfo`, :class:`MapInfo`,
:class:`LinkInfo`, :class:`JitedImage`), the id <-> fd commands, and
BPF_ENABLE_STATS.  The conventions are those of :mod:`.core`.
"""
from __future__ import annotations

import errno as E

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .ffi import CData

from ..errors import PermissionDeniedError
from .constants import BPF_STATS_RUN_TIME, Cmd, LinkType, MapType, ProgType, enum_name
from .core import (Fd, addr, as_fd, attr_size, cstr, decode_cstr, kernel_error, new_attr,
                   try_bpf)
from .ffi import ffi
from .._record import Record, record

__all__ = ["ProgInfo", "MapInfo", "LinkInfo", "UprobeMultiLinkInfo", "JitedImage",
           "obj_get_info_by_fd", "prog_info", "map_info", "link_info",
           "prog_xlated_insns", "prog_jited", "prog_jited_insns",
           "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id",
           "prog_get_next_id", "map_get_next_id", "link_get_next_id", "enable_stats"]

_SZ_GET_ID = attr_size("get_id", "open_flags")
_SZ_INFO = attr_size("info", "info")
_SZ_ENABLE_STATS = attr_size("enable_stats", "type")


def obj_get_info_by_fd(fd: "int | Fd", info: CData) -> None:
    """BPF_OBJ_GET_INFO_BY_FD into ``info`` (a cffi ``struct bpf_*_info *``)."""
    fd = as_fd(fd)
    attr = new_attr()
    attr.info.bpf_fd = fd
    attr.info.info_len = ffi.sizeof(info[0])
    attr.info.info = addr(info)
    ret = try_bpf(Cmd.OBJ_GET_INFO_BY_FD, attr, _SZ_INFO)
    if ret < 0:
        raise kernel_error("BPF_OBJ_GET_INFO_BY_FD", -ret, f"fd {fd}")


def _named_type_repr(info: "ProgInfo | MapInfo | LinkInfo") -> str:
    """An info record's fields, its type number followed by its name."""
    parts = [f"type={info.type} ({info.type_name})"]
    parts += [f"{n}={getattr(info, n)!r}" for n in info._fields if n != "type"]
    return f"{type(info).__name__}({', '.join(parts)})"


# (duplicates: deliberate, the records below mirror the kernel's info structs field by field)
@record
class ProgInfo(Record):
    """What the kernel tells about a loaded program (``struct bpf_prog_info``)."""

    type: int
    id: int
    tag: str                    #: 8-byte tag as 16 hex digits
    name: str
    jited_len: int
    xlated_len: int
    load_time_ns: int           #: ns since boot
    created_by_uid: int
    map_ids: tuple[int, ...]
    run_cnt: int                #: only counted while stats are enabled (:func:`enable_stats`)
    run_time_ns: int
    recursion_misses: int
    verified_insns: int
    gpl_compatible: bool
    btf_id: int
    nr_jited_ksyms: int

    @property
    def type_name(self) -> str:
        """The program type's name (``"XDP"``; ``"#<n>"`` when unknown here)."""
        return enum_name(ProgType, self.type)

    def __repr__(self) -> str:
        """The fields, the type with its name: ``ProgInfo(type=6 (XDP), id=...)``."""
        return _named_type_repr(self)


@record
class MapInfo(Record):
    """What the kernel tells about a map (``struct bpf_map_info``)."""

    type: int
    id: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int
    name: str
    map_extra: int
    btf_id: int

    @property
    def type_name(self) -> str:
        """The map type's name (``"HASH"``; ``"#<n>"`` when unknown here)."""
        return enum_name(MapType, self.type)

    def __repr__(self) -> str:
        """The fields, the type with its name: ``MapInfo(type=1 (HASH), id=...)``."""
        return _named_type_repr(self)


@record
class UprobeMultiLinkInfo(Record):
    """The uprobe_multi part of a link's info."""

    path: str
    offsets: tuple[int, ...]
    ref_ctr_offsets: tuple[int, ...]
    cookies: tuple[int, ...]
    flags: int
    pid: int


@record
class LinkInfo(Record):
    """What the kernel tells about a link (``struct bpf_link_info``)."""

    type: int
    id: int
    prog_id: int
    uprobe_multi: UprobeMultiLinkInfo | None = None
    raw_tracepoint: str | None = None
    perf_event_type: int | None = None    #: enum bpf_perf_event_type for perf links

    @property
    def type_name(self) -> str:
        """The link type's name (``"UPROBE_MULTI"``; ``"#<n>"`` when unknown here)."""
        return enum_name(LinkType, self.type)

    def __repr__(self) -> str:
        """The fields, the type with its name: ``LinkInfo(type=12 (UPROBE_MULTI), ...)``."""
        return _named_type_repr(self)


@record
class JitedImage(Record):
    """JIT'd machine code of a program and where its functions live."""

    code: bytes
    ksyms: tuple[int, ...]       #: kernel address of each function
    func_lens: tuple[int, ...]   #: byte length of each function


def prog_info(fd: "int | Fd") -> ProgInfo:
    """The :class:`ProgInfo` of a program (including its map ids)."""
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    map_ids: tuple[int, ...] = ()
    n = info.nr_map_ids
    if n:
        ids = ffi.new("uint32_t[]", n)
        info2 = ffi.new("struct bpf_prog_info *")
        info2.nr_map_ids = n
        info2.map_ids = addr(ids)
        obj_get_info_by_fd(fd, info2)
        map_ids = tuple(ids[i] for i in range(min(n, info2.nr_map_ids)))
    return ProgInfo(
        type=info.type, id=info.id, tag=bytes(ffi.buffer(info.tag)).hex(),
        name=cstr(info.name), jited_len=info.jited_prog_len,
        xlated_len=info.xlated_prog_len, load_time_ns=info.load_time,
        created_by_uid=info.created_by_uid, map_ids=map_ids, run_cnt=info.run_cnt,
        run_time_ns=info.run_time_ns, recursion_misses=info.recursion_misses,
        verified_insns=info.verified_insns, gpl_compatible=bool(info.gpl_compatible & 1),
        btf_id=info.btf_id, nr_jited_ksyms=info.nr_jited_ksyms)


def prog_xlated_insns(fd: "int | Fd") -> bytes:
    """The program as the kernel rewrote it (xlated instructions, 8 bytes each).

    Map fds appear as map ids/addresses the way the kernel dumps them.
    """
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    n = info.xlated_prog_len
    if not n:
        return b""
    buf = bytearray(n)
    cd = ffi.from_buffer(buf)
    info2 = ffi.new("struct bpf_prog_info *")
    info2.xlated_prog_len = n
    info2.xlated_prog_insns = addr(cd)
    obj_get_info_by_fd(fd, info2)
    if info2.xlated_prog_insns == 0:
        raise PermissionDeniedError(E.EPERM, "BPF_OBJ_GET_INFO_BY_FD",
                                    "the kernel withheld the xlated instructions",
                                    "needs CAP_SYS_ADMIN/CAP_PERFMON and kernel.kptr_restrict < 2")
    return bytes(buf[:min(n, info2.xlated_prog_len)])


def prog_jited(fd: "int | Fd") -> JitedImage:
    """The JIT'd machine code with its function addresses and lengths."""
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    n, nks, nfl = info.jited_prog_len, info.nr_jited_ksyms, info.nr_jited_func_lens
    if not n:
        return JitedImage(b"", (), ())
    buf = bytearray(n)
    cd = ffi.from_buffer(buf)
    ks = ffi.new("uint64_t[]", max(nks, 1))
    fl = ffi.new("uint32_t[]", max(nfl, 1))
    info2 = ffi.new("struct bpf_prog_info *")
    info2.jited_prog_len = n
    info2.jited_prog_insns = addr(cd)
    info2.nr_jited_ksyms = nks
    info2.jited_ksyms = addr(ks) if nks else 0
    info2.nr_jited_func_lens = nfl
    info2.jited_func_lens = addr(fl) if nfl else 0
    obj_get_info_by_fd(fd, info2)
    if info2.jited_prog_insns == 0:
        raise PermissionDeniedError(E.EPERM, "BPF_OBJ_GET_INFO_BY_FD",
                                    "the kernel withheld the JIT'd code",
                                    "needs CAP_SYS_ADMIN/CAP_PERFMON and kernel.kptr_restrict < 2")
    return JitedImage(bytes(buf[:min(n, info2.jited_prog_len)]),
                      tuple(ks[i] for i in range(nks)),
                      tuple(fl[i] for i in range(nfl)))


def prog_jited_insns(fd: "int | Fd") -> bytes:
    """Just the JIT'd machine code bytes of a program."""
    return prog_jited(fd).code


def map_info(fd: "int | Fd") -> MapInfo:
    """The :class:`MapInfo` of a map."""
    info = ffi.new("struct bpf_map_info *")
    obj_get_info_by_fd(fd, info)
    return MapInfo(type=info.type, id=info.id, key_size=info.key_size,
                   value_size=info.value_size, max_entries=info.max_entries,
                   flags=info.map_flags, name=cstr(info.name), map_extra=info.map_extra,
                   btf_id=info.btf_id)


def link_info(fd: "int | Fd") -> LinkInfo:
    """The :class:`LinkInfo` of a link (with uprobe_multi / raw_tracepoint details)."""
    info = ffi.new("struct bpf_link_info *")
    obj_get_info_by_fd(fd, info)
    um = rtp = pet = None
    if info.type == LinkType.UPROBE_MULTI:
        cnt = info.uprobe_multi.count
        path = bytearray(4096)
        pcd = ffi.from_buffer(path)
        offs = ffi.new("uint64_t[]", max(cnt, 1))
        refs = ffi.new("uint64_t[]", max(cnt, 1))
        cks = ffi.new("uint64_t[]", max(cnt, 1))
        info2 = ffi.new("struct bpf_link_info *")
        u = info2.uprobe_multi
        u.path = addr(pcd)
        u.path_size = len(path)
        if cnt:
            u.count = cnt
            u.offsets = addr(offs)
            u.ref_ctr_offsets = addr(refs)
            u.cookies = addr(cks)
        obj_get_info_by_fd(fd, info2)
        n = min(cnt, u.count)
        um = UprobeMultiLinkInfo(
            path=decode_cstr(path), offsets=tuple(offs[i] for i in range(n)),
            ref_ctr_offsets=tuple(refs[i] for i in range(n)),
            cookies=tuple(cks[i] for i in range(n)), flags=u.flags, pid=u.pid)
    elif info.type == LinkType.RAW_TRACEPOINT:
        buf = bytearray(max(info.raw_tracepoint.tp_name_len, 1) + 1)
        cd = ffi.from_buffer(buf)
        info2 = ffi.new("struct bpf_link_info *")
        info2.raw_tracepoint.tp_name = addr(cd)
        info2.raw_tracepoint.tp_name_len = len(buf)
        obj_get_info_by_fd(fd, info2)
        rtp = decode_cstr(buf)
    elif info.type == LinkType.PERF_EVENT:
        pet = info.perf_event.type
    return LinkInfo(type=info.type, id=info.id, prog_id=info.prog_id,
                    uprobe_multi=um, raw_tracepoint=rtp, perf_event_type=pet)


# ----------------------------------------------------------------- ids / fds
def _get_fd_by_id(cmd: int, what: str, obj_id: int, open_flags: int) -> Fd:
    attr = new_attr()
    attr.get_id.start_id = obj_id
    attr.get_id.open_flags = open_flags
    ret = try_bpf(cmd, attr, _SZ_GET_ID)
    if ret < 0:
        raise kernel_error(cmd, -ret, f"{what} id {obj_id}", what=what, id=obj_id)
    return Fd(ret)


def prog_get_fd_by_id(prog_id: int) -> Fd:
    """BPF_PROG_GET_FD_BY_ID."""
    return _get_fd_by_id(Cmd.PROG_GET_FD_BY_ID, "program", prog_id, 0)


def map_get_fd_by_id(map_id: int, open_flags: int = 0) -> Fd:
    """BPF_MAP_GET_FD_BY_ID (``open_flags``: BPF_F_RDONLY / BPF_F_WRONLY)."""
    return _get_fd_by_id(Cmd.MAP_GET_FD_BY_ID, "map", map_id, open_flags)


def link_get_fd_by_id(link_id: int) -> Fd:
    """BPF_LINK_GET_FD_BY_ID."""
    return _get_fd_by_id(Cmd.LINK_GET_FD_BY_ID, "link", link_id, 0)


def _get_next_id(cmd: int, start: int) -> int | None:
    attr = new_attr()
    attr.get_id.start_id = start
    ret = try_bpf(cmd, attr, _SZ_GET_ID)
    if ret < 0:
        if ret == -E.ENOENT:
            return None
        raise kernel_error(cmd, -ret)
    next_id: int = attr.get_id.next_id
    return next_id


def prog_get_next_id(start: int = 0) -> int | None:
    """The id of the next loaded program after ``start`` (None at the end)."""
    return _get_next_id(Cmd.PROG_GET_NEXT_ID, start)


def map_get_next_id(start: int = 0) -> int | None:
    """The id of the next map after ``start`` (None at the end)."""
    return _get_next_id(Cmd.MAP_GET_NEXT_ID, start)


def link_get_next_id(start: int = 0) -> int | None:
    """The id of the next link after ``start`` (None at the end)."""
    return _get_next_id(Cmd.LINK_GET_NEXT_ID, start)


def enable_stats(stats_type: int = BPF_STATS_RUN_TIME) -> Fd:
    """BPF_ENABLE_STATS: run_cnt/run_time_ns are counted while the returned Fd is open."""
    attr = new_attr()
    attr.enable_stats.type = stats_type
    ret = try_bpf(Cmd.ENABLE_STATS, attr, _SZ_ENABLE_STATS)
    if ret < 0:
        raise kernel_error("BPF_ENABLE_STATS", -ret, type=stats_type)
    return Fd(ret)
