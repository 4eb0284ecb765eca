"""Numbers of the bpf(2) and perf_event_open(2) UAPI, written once as data.

Values follow ``linux/bpf.h`` and ``linux/perf_event.h``; the enums only grow, so
a name absent here is simply newer than this table (pass the number instead).
"""
from __future__ import annotations

from ..errors import OptionError, UnknownNameError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, TypeVar

    _N = TypeVar("_N", bound="_Numbers")


class _NumbersMeta(type):
    """Makes a class of upper-case ``NAME = number`` lines behave like an
    ``enum.IntEnum``: each member is an ``int`` with ``.name`` and ``.value``;
    ``Cls(number)``, ``Cls["NAME"]``, iteration, ``len`` and ``__members__``
    work as they do for enums (aliases map to the first name of a value).

    Why not ``enum.IntEnum``: creating these ~190 members with the enum
    machinery (and importing it) cost ~4 ms of every start-up; this costs
    ~0.1 ms, and every program that touches the kernel imports these tables.
    """

    if TYPE_CHECKING:
        _members: dict[str, Any]       # each value an instance of the class
        _by_value: dict[int, Any]

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _NumbersMeta:
        cls = super().__new__(mcls, name, bases, ns)
        members: dict[str, Any] = {}
        by_value: dict[int, Any] = {}
        for key, value in ns.items():
            if key.isupper() and type(value) is int:
                member: Any = by_value.get(value)
                if member is None:
                    member = int.__new__(cls, value)  # type: ignore[arg-type]
                    member._name = key
                    by_value[value] = member
                members[key] = member
                type.__setattr__(cls, key, member)
        type.__setattr__(cls, "_members", members)
        type.__setattr__(cls, "_by_value", by_value)
        return cls

    def __call__(cls: type[_N], value: int) -> _N:  # type: ignore[misc]
        try:
            return cls._by_value[value]  # type: ignore[no-any-return]
        except (KeyError, TypeError):
            raise OptionError(f"{value!r} is not a valid {cls.__name__}") from None

    def __getitem__(cls: type[_N], name: str) -> _N:  # type: ignore[misc]
        try:
            return cls._members[name]  # type: ignore[no-any-return]
        except KeyError:
            raise UnknownNameError(f"{name!r} is not a {cls.__name__} name") from None

    def __iter__(cls: type[_N]) -> Iterator[_N]:  # type: ignore[misc]
        return iter(cls._by_value.values())

    def __len__(cls) -> int:
        return len(cls._by_value)

    def __contains__(cls, member: object) -> bool:
        return isinstance(member, cls)

    @property
    def __members__(cls: type[_N]) -> dict[str, _N]:  # type: ignore[misc]
        return dict(cls._members)

    def __setattr__(cls, name: str, value: object) -> None:
        raise AttributeError(f"cannot reassign {cls.__name__}.{name}")


class _Numbers(int, metaclass=_NumbersMeta):
    """Base of the number tables below (see :class:`_NumbersMeta`)."""

    _name: str

    @property
    def name(self) -> str:
        """The member's name (``"HASH"``)."""
        return self._name

    @property
    def value(self) -> int:
        """The member's number, as a plain ``int``."""
        return int(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self._name}: {int(self)}>"

    __str__ = int.__repr__
    __format__ = int.__format__

    def __reduce__(self) -> tuple[type, tuple[int]]:
        return type(self), (int(self),)


def enum_name(cls: type[_Numbers], value: int) -> str:
    """``MapType.HASH`` -> ``"HASH"``; an unknown number -> ``"#<n>"``."""
    try:
        return cls(value).name
    except ValueError:
        return f"#{value}"


class Cmd(_Numbers):
    """bpf(2) commands (``enum bpf_cmd``)."""

    MAP_CREATE = 0
    MAP_LOOKUP_ELEM = 1
    MAP_UPDATE_ELEM = 2
    MAP_DELETE_ELEM = 3
    MAP_GET_NEXT_KEY = 4
    PROG_LOAD = 5
    OBJ_PIN = 6
    OBJ_GET = 7
    PROG_ATTACH = 8
    PROG_DETACH = 9
    PROG_TEST_RUN = 10
    PROG_GET_NEXT_ID = 11
    MAP_GET_NEXT_ID = 12
    PROG_GET_FD_BY_ID = 13
    MAP_GET_FD_BY_ID = 14
    OBJ_GET_INFO_BY_FD = 15
    PROG_QUERY = 16
    RAW_TRACEPOINT_OPEN = 17
    BTF_LOAD = 18
    BTF_GET_FD_BY_ID = 19
    TASK_FD_QUERY = 20
    MAP_LOOKUP_AND_DELETE_ELEM = 21
    MAP_FREEZE = 22
    BTF_GET_NEXT_ID = 23
    MAP_LOOKUP_BATCH = 24
    MAP_LOOKUP_AND_DELETE_BATCH = 25
    MAP_UPDATE_BATCH = 26
    MAP_DELETE_BATCH = 27
    LINK_CREATE = 28
    LINK_UPDATE = 29
    LINK_GET_FD_BY_ID = 30
    LINK_GET_NEXT_ID = 31
    ENABLE_STATS = 32
    ITER_CREATE = 33
    LINK_DETACH = 34
    PROG_BIND_MAP = 35
    TOKEN_CREATE = 36
    PROG_STREAM_READ_BY_FD = 37
    PROG_ASSOC_STRUCT_OPS = 38


class MapType(_Numbers):
    """Map types (``enum bpf_map_type``)."""

    UNSPEC = 0
    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERF_EVENT_ARRAY = 4
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    STACK_TRACE = 7
    CGROUP_ARRAY = 8
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    DEVMAP = 14
    SOCKMAP = 15
    CPUMAP = 16
    XSKMAP = 17
    SOCKHASH = 18
    CGROUP_STORAGE = 19
    REUSEPORT_SOCKARRAY = 20
    PERCPU_CGROUP_STORAGE = 21
    QUEUE = 22
    STACK = 23
    SK_STORAGE = 24
    DEVMAP_HASH = 25
    STRUCT_OPS = 26
    RINGBUF = 27
    INODE_STORAGE = 28
    TASK_STORAGE = 29
    BLOOM_FILTER = 30
    USER_RINGBUF = 31
    CGRP_STORAGE = 32
    ARENA = 33
    INSN_ARRAY = 34
    RHASH = 35


class ProgType(_Numbers):
    """Program types (``enum bpf_prog_type``)."""

    UNSPEC = 0
    SOCKET_FILTER = 1
    KPROBE = 2
    SCHED_CLS = 3
    SCHED_ACT = 4
    TRACEPOINT = 5
    XDP = 6
    PERF_EVENT = 7
    CGROUP_SKB = 8
    CGROUP_SOCK = 9
    LWT_IN = 10
    LWT_OUT = 11
    LWT_XMIT = 12
    SOCK_OPS = 13
    SK_SKB = 14
    CGROUP_DEVICE = 15
    SK_MSG = 16
    RAW_TRACEPOINT = 17
    CGROUP_SOCK_ADDR = 18
    LWT_SEG6LOCAL = 19
    LIRC_MODE2 = 20
    SK_REUSEPORT = 21
    FLOW_DISSECTOR = 22
    CGROUP_SYSCTL = 23
    RAW_TRACEPOINT_WRITABLE = 24
    CGROUP_SOCKOPT = 25
    TRACING = 26
    STRUCT_OPS = 27
    EXT = 28
    LSM = 29
    SK_LOOKUP = 30
    SYSCALL = 31
    NETFILTER = 32


class AttachType(_Numbers):
    """Attach types (``enum bpf_attach_type``)."""

    CGROUP_INET_INGRESS = 0
    CGROUP_INET_EGRESS = 1
    CGROUP_INET_SOCK_CREATE = 2
    CGROUP_SOCK_OPS = 3
    SK_SKB_STREAM_PARSER = 4
    SK_SKB_STREAM_VERDICT = 5
    CGROUP_DEVICE = 6
    SK_MSG_VERDICT = 7
    CGROUP_INET4_BIND = 8
    CGROUP_INET6_BIND = 9
    CGROUP_INET4_CONNECT = 10
    CGROUP_INET6_CONNECT = 11
    CGROUP_INET4_POST_BIND = 12
    CGROUP_INET6_POST_BIND = 13
    CGROUP_UDP4_SENDMSG = 14
    CGROUP_UDP6_SENDMSG = 15
    LIRC_MODE2 = 16
    FLOW_DISSECTOR = 17
    CGROUP_SYSCTL = 18
    CGROUP_UDP4_RECVMSG = 19
    CGROUP_UDP6_RECVMSG = 20
    CGROUP_GETSOCKOPT = 21
    CGROUP_SETSOCKOPT = 22
    TRACE_RAW_TP = 23
    TRACE_FENTRY = 24
    TRACE_FEXIT = 25
    MODIFY_RETURN = 26
    LSM_MAC = 27
    TRACE_ITER = 28
    CGROUP_INET4_GETPEERNAME = 29
    CGROUP_INET6_GETPEERNAME = 30
    CGROUP_INET4_GETSOCKNAME = 31
    CGROUP_INET6_GETSOCKNAME = 32
    XDP_DEVMAP = 33
    CGROUP_INET_SOCK_RELEASE = 34
    XDP_CPUMAP = 35
    SK_LOOKUP = 36
    XDP = 37
    SK_SKB_VERDICT = 38
    SK_REUSEPORT_SELECT = 39
    SK_REUSEPORT_SELECT_OR_MIGRATE = 40
    PERF_EVENT = 41
    TRACE_KPROBE_MULTI = 42
    LSM_CGROUP = 43
    STRUCT_OPS = 44
    NETFILTER = 45
    TCX_INGRESS = 46
    TCX_EGRESS = 47
    TRACE_UPROBE_MULTI = 48
    CGROUP_UNIX_CONNECT = 49
    CGROUP_UNIX_SENDMSG = 50
    CGROUP_UNIX_RECVMSG = 51
    CGROUP_UNIX_GETPEERNAME = 52
    CGROUP_UNIX_GETSOCKNAME = 53
    NETKIT_PRIMARY = 54
    NETKIT_PEER = 55
    TRACE_KPROBE_SESSION = 56
    TRACE_UPROBE_SESSION = 57
    TRACE_FSESSION = 58
    TRACE_FENTRY_MULTI = 59
    TRACE_FEXIT_MULTI = 60
    TRACE_FSESSION_MULTI = 61


class LinkType(_Numbers):
    """Link types (``enum bpf_link_type``)."""

    UNSPEC = 0
    RAW_TRACEPOINT = 1
    TRACING = 2
    CGROUP = 3
    ITER = 4
    NETNS = 5
    XDP = 6
    PERF_EVENT = 7
    KPROBE_MULTI = 8
    STRUCT_OPS = 9
    NETFILTER = 10
    TCX = 11
    UPROBE_MULTI = 12
    NETKIT = 13
    SOCKMAP = 14
    TRACING_MULTI = 15


# ------------------------------------------------------------------ flags
# (duplicates: deliberate, these tables are parallel NAME = number lines, as the UAPI headers
# declare them; each name must stay a plain module attribute for importers and type checkers)
# BPF_MAP_UPDATE_ELEM flags
BPF_ANY = 0
BPF_NOEXIST = 1
BPF_EXIST = 2
BPF_F_LOCK = 4

# BPF_MAP_CREATE map_flags
BPF_F_NO_PREALLOC = 1 << 0
BPF_F_NO_COMMON_LRU = 1 << 1
BPF_F_NUMA_NODE = 1 << 2
BPF_F_RDONLY = 1 << 3
BPF_F_WRONLY = 1 << 4
BPF_F_STACK_BUILD_ID = 1 << 5
BPF_F_ZERO_SEED = 1 << 6
BPF_F_RDONLY_PROG = 1 << 7
BPF_F_WRONLY_PROG = 1 << 8
BPF_F_MMAPABLE = 1 << 10
BPF_F_INNER_MAP = 1 << 12

BPF_OBJ_NAME_LEN = 16
BPF_TAG_SIZE = 8

# BPF_PROG_LOAD prog_flags
BPF_F_STRICT_ALIGNMENT = 1 << 0
BPF_F_ANY_ALIGNMENT = 1 << 1
BPF_F_SLEEPABLE = 1 << 4

# Verifier log levels
BPF_LOG_LEVEL1 = 1
BPF_LOG_LEVEL2 = 2
BPF_LOG_STATS = 4

# BPF_PROG_TEST_RUN flags
BPF_F_TEST_RUN_ON_CPU = 1 << 0

# uprobe_multi link flags
BPF_F_UPROBE_MULTI_RETURN = 1 << 0

# BPF_ENABLE_STATS types
BPF_STATS_RUN_TIME = 0

# helper flags
BPF_F_CURRENT_CPU = 0xFFFFFFFF
BPF_F_USER_STACK = 1 << 8
BPF_F_FAST_STACK_CMP = 1 << 9
BPF_F_REUSE_STACKID = 1 << 10

PERF_MAX_STACK_DEPTH = 127

# ------------------------------------------------------------- perf events
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_DUMMY = 9
PERF_COUNT_SW_BPF_OUTPUT = 10

PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_SAMPLE_TIME = 1 << 2
PERF_SAMPLE_CPU = 1 << 7
PERF_SAMPLE_RAW = 1 << 10

# bits of perf_event_attr.flags (the C bitfield)
PERF_ATTR_FLAG_DISABLED = 1 << 0
PERF_ATTR_FLAG_INHERIT = 1 << 1
PERF_ATTR_FLAG_PINNED = 1 << 2
PERF_ATTR_FLAG_EXCLUSIVE = 1 << 3
PERF_ATTR_FLAG_EXCLUDE_USER = 1 << 4
PERF_ATTR_FLAG_EXCLUDE_KERNEL = 1 << 5
PERF_ATTR_FLAG_EXCLUDE_HV = 1 << 6
PERF_ATTR_FLAG_FREQ = 1 << 10
PERF_ATTR_FLAG_ENABLE_ON_EXEC = 1 << 12
PERF_ATTR_FLAG_WATERMARK = 1 << 14
PERF_ATTR_FLAG_SAMPLE_ID_ALL = 1 << 18
PERF_ATTR_FLAG_USE_CLOCKID = 1 << 25
PERF_ATTR_FLAG_WRITE_BACKWARD = 1 << 27

PERF_ATTR_SIZE_VER0 = 64
PERF_ATTR_SIZE_VER1 = 72
PERF_ATTR_SIZE_VER5 = 112
PERF_ATTR_SIZE_VER8 = 136

PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

# ioctls (generic _IOC encoding: x86_64, arm64, riscv64, loongarch64)
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_REFRESH = 0x2402
PERF_EVENT_IOC_RESET = 0x2403
PERF_EVENT_IOC_SET_OUTPUT = 0x2405
PERF_EVENT_IOC_SET_FILTER = 0x40082406
PERF_EVENT_IOC_ID = 0x80082407
PERF_EVENT_IOC_SET_BPF = 0x40042408
PERF_EVENT_IOC_PAUSE_OUTPUT = 0x40042409

PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9

# BPF ring buffer (BPF_MAP_TYPE_RINGBUF): bits of a record header's length word,
# the header's size, and the ringbuf_output/ringbuf_submit flags (no wakeup at
# all, or a wakeup every time; without either the kernel wakes the reader when
# it had caught up)
BPF_RINGBUF_BUSY_BIT = 1 << 31
BPF_RINGBUF_DISCARD_BIT = 1 << 30
BPF_RINGBUF_HDR_SZ = 8
BPF_RB_NO_WAKEUP = 1
BPF_RB_FORCE_WAKEUP = 2

# prctl(2) options (linux/prctl.h)
PR_SET_PDEATHSIG = 1
