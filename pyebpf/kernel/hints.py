"""What a failed system call raises: errno -> exception class and hint, as data.

The policy is three tables, read by :func:`kernel_error`:

* :data:`DEFAULT` -- what an errno means for any call (EPERM: permission,
  ENOMEM: a resource limit, ...);
* :data:`RULES` -- per operation (``"BPF_MAP_UPDATE_ELEM"``, ``"perf_event_open"``
  ...), what an errno means *there* (E2BIG on an update: the map is full);
* :data:`OTHERWISE` -- per operation, the rule for every errno its table and
  the permission errnos leave out (a failed BPF_LINK_CREATE is an
  :class:`~pyebpf.errors.AttachError` whatever the errno).

A rule is ``(class, detail, hint)``.  ``class`` None takes the operation's
:data:`OTHERWISE` class, else the errno's :data:`DEFAULT` one; ``detail`` None
keeps the caller's.  Detail and hint are ``str.format`` templates filled from
the keywords the caller passes (``fd=``, ``path=`` ...; None counts as not
passed) plus ``{perm}`` / ``{perf_perm}`` (who may do this here:
:func:`perm_hint`); a hint whose template names something the caller did not
pass is left out.

The verifier's rejections get their hint from :data:`VERIFIER_HINTS` (first
matching needle wins), applied to :func:`verifier_message`.
"""
from __future__ import annotations

import errno as E
import os

from ..errors import (AttachError, KernelError, MapFullError, NotSupportedError,
                      PermissionDeniedError, ResourceLimitError)
from .constants import Cmd, enum_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    #: ``(class or None, detail template or None, hint template)``
    Rule = tuple[type[KernelError] | None, str | None, str]

__all__ = ["ENOTSUPP", "NOT_SUPPORTED", "DEFAULT", "RULES", "OTHERWISE", "kernel_error",
           "error_for", "perm_hint", "cmd_name", "VERIFIER_ERRNOS", "VERIFIER_NOISE",
           "VERIFIER_HINTS", "verifier_message", "verifier_hint"]

#: Kernel-internal "operation not supported" that leaks out of some bpf() paths.
ENOTSUPP = 524
#: the errnos that mean "not supported here"
NOT_SUPPORTED = (E.EOPNOTSUPP, ENOTSUPP)

_PERM = "{perm}"
_ENOMEM = ("out of memory or over RLIMIT_MEMLOCK (on kernels before 5.11 BPF memory is "
           "charged to it): try `ulimit -l unlimited` or a smaller max_entries")
_EMFILE = "too many open files: close unused maps/programs/links or raise `ulimit -n`"
_UNSUPPORTED = "this kernel does not support the operation for this object type"

#: errno -> rule, for every operation
DEFAULT: dict[int, Rule] = {
    E.EPERM: (PermissionDeniedError, None, _PERM),
    E.EACCES: (PermissionDeniedError, None, _PERM),
    E.ENOMEM: (ResourceLimitError, None, _ENOMEM),
    E.EMFILE: (ResourceLimitError, None, _EMFILE),
    E.ENFILE: (ResourceLimitError, None, _EMFILE),
    E.E2BIG: (ResourceLimitError, None, "an argument exceeds a kernel limit"),
    E.EOPNOTSUPP: (NotSupportedError, None, _UNSUPPORTED),
    ENOTSUPP: (NotSupportedError, None, _UNSUPPORTED),
    E.EBADF: (KernelError, None,
              "the file descriptor is not open or is not the right kind of BPF object"),
}
_PLAIN: Rule = (KernelError, None, "")


def _each(errnos: tuple[int, ...], rule: Rule) -> dict[int, Rule]:
    return dict.fromkeys(errnos, rule)


# ------------------------------------------------------------------- maps
_MAP_FULL = "delete elements, raise max_entries, or use an LRU map that evicts old entries"
_ELEM: dict[int, Rule] = {
    **_each(NOT_SUPPORTED, (NotSupportedError, None,
                            "this map type does not support the operation from user space")),
    E.EINVAL: (KernelError, "fd {fd}",
               "the fd is not a BPF map, or the flags are invalid for this map type"),
}
_UPDATE_REFUSED: Rule = (
    PermissionDeniedError, "map fd {fd} refused the update from user space",
    "the map is frozen (BPF_MAP_FREEZE) or was created with BPF_F_RDONLY; otherwise: {perm}")
_NO_BATCH: Rule = (NotSupportedError, None, "batch operations need Linux 5.6+ and a map type "
                   "that implements them; use per-element calls")

# ------------------------------------------------------------------- links
_LINK: dict[int, Rule] = {
    E.EPERM: DEFAULT[E.EPERM],
    E.EACCES: DEFAULT[E.EACCES],
    E.EINVAL: (None, None, "this kernel lacks the attach type, or the program's type / "
                           "expected_attach_type does not match it"),
    E.EBADF: (None, None,
              "the program or target fd is not valid (perf links need a perf event fd)"),
    E.ENOENT: (None, None, "{path} does not exist"),      # uprobe_multi: path= given
    E.ESRCH: (None, None, "no process with pid {pid}"),
    **_each(NOT_SUPPORTED, (None, None, "not supported by this kernel for this "
                                        "program/attach type")),
}

_BY_ID: dict[int, Rule] = {E.ENOENT: (None, None, "no {what} with id {id} (it was freed?)")}

_MOUNT = "as root run: mount -t {fstype} {source} {path}"

#: operation -> errno -> rule
RULES: dict[str, dict[int, Rule]] = {
    "BPF_MAP_CREATE": {
        E.EINVAL: (NotSupportedError, None,
                   "map type {tname} is not supported by this kernel, or its key/value size, "
                   "max_entries or flags are invalid for it (e.g. PERF_EVENT_ARRAY needs 4/4; "
                   "RINGBUF needs 0/0 and a power-of-2 multiple of the page size; QUEUE/STACK "
                   "need key_size 0)"),
    },
    "BPF_MAP_LOOKUP_ELEM": _ELEM,
    "BPF_MAP_GET_NEXT_KEY": _ELEM,
    "BPF_MAP_LOOKUP_AND_DELETE_ELEM": _ELEM,
    "BPF_MAP_UPDATE_ELEM": {
        **_ELEM,
        E.E2BIG: (MapFullError, "map fd {fd} is full (or the array index is out of range)",
                  _MAP_FULL),
        E.EEXIST: (KernelError, "the key already exists and BPF_NOEXIST was given", ""),
        E.EPERM: _UPDATE_REFUSED,
        E.EINVAL: (KernelError, "map fd {fd}",
                   "bad flags for this map type (BPF_F_LOCK needs a spin lock in the value), "
                   "or the map does not allow updates from user space"),
    },
    "BPF_MAP_DELETE_ELEM": {
        **_ELEM,
        E.EINVAL: (NotSupportedError, None,
                   "elements of array maps cannot be deleted; write zero instead"),
    },
    "BPF_MAP_FREEZE": {
        E.EBUSY: (KernelError, None, "the map is mmap'ed writable or already frozen"),
        E.EINVAL: (NotSupportedError, None, "this kernel or map type cannot be frozen"),
    },
    "BPF_MAP_LOOKUP_BATCH": _each((*NOT_SUPPORTED, E.EINVAL), _NO_BATCH),
    "BPF_MAP_LOOKUP_AND_DELETE_BATCH": _each((*NOT_SUPPORTED, E.EINVAL), _NO_BATCH),
    "BPF_MAP_DELETE_BATCH": _each((*NOT_SUPPORTED, E.EINVAL), _NO_BATCH),
    "BPF_MAP_UPDATE_BATCH": {
        **_each(NOT_SUPPORTED, _NO_BATCH),
        E.E2BIG: (MapFullError, None, _MAP_FULL),
        E.EPERM: _UPDATE_REFUSED,
    },
    "BPF_PROG_LOAD": {
        E.E2BIG: (ResourceLimitError, None, "the program has too many instructions "
                                            "(limit 1,000,000 verified / 4096 unprivileged)"),
        E.ENOSPC: (ResourceLimitError, "the verifier log does not fit in {size} bytes",
                   "use a lower log_level"),
        **_each((E.EINVAL, *NOT_SUPPORTED), (
            NotSupportedError,
            "program type {tname} ({prog_type}), expected_attach_type {attach}",
            "this kernel does not support that program type, or it needs another "
            "expected_attach_type / attach_btf_id / prog_flags{license_note}")),
    },
    "BPF_PROG_TEST_RUN": {
        E.ENOSPC: (ResourceLimitError, None,
                   "the output is {out} bytes: pass data_size_out >= {out}"),
        **_each(NOT_SUPPORTED, (NotSupportedError, None,
                                "this program type cannot be test-run (XDP, socket filter, "
                                "tc, raw_tracepoint, syscall... can)")),
        E.EINVAL: (KernelError, None,
                   "the data/ctx sizes, repeat or flags are invalid for this program type "
                   "(e.g. XDP/skb programs need >= 14 bytes of data; raw_tracepoint programs "
                   "take only ctx and no repeat)"),
    },
    "BPF_PROG_GET_FD_BY_ID": _BY_ID,
    "BPF_MAP_GET_FD_BY_ID": _BY_ID,
    "BPF_LINK_GET_FD_BY_ID": _BY_ID,
    "BPF_ENABLE_STATS": {
        E.EINVAL: (NotSupportedError, "type {type}",
                   "needs Linux 5.8+; or set the sysctl kernel.bpf_stats_enabled=1"),
    },
    "BPF_OBJ_PIN": {
        E.EEXIST: (None, None,
                   "something is already pinned at {path}: unpin it (os.unlink) first"),
        E.ENOENT: (None, None,
                   "the parent directory does not exist: create it with os.makedirs"),
        E.EPERM: (None, None,
                  "the path must be on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)"),
    },
    "BPF_OBJ_GET": {
        E.ENOENT: (None, None, "nothing is pinned at {path}"),
        E.EINVAL: (None, None, "{path} is not a pinned BPF object"),
    },
    "BPF_LINK_CREATE": _LINK,
    "BPF_RAW_TRACEPOINT_OPEN": {
        E.EPERM: DEFAULT[E.EPERM],
        E.EACCES: DEFAULT[E.EACCES],
        E.ENOENT: (None, None, "no raw tracepoint named {name!r}"),
        E.EINVAL: (None, None, "the program must be of type RAW_TRACEPOINT (or TRACING with "
                               "attach_btf_id)"),
    },
    "perf_event_open": {
        **_each((E.EPERM, E.EACCES), (PermissionDeniedError, None, "{perf_perm}")),
        **_each((E.ENOENT, E.EOPNOTSUPP, E.ENODEV), (
            NotSupportedError, None, "this kernel or PMU does not provide that event")),
        E.E2BIG: (NotSupportedError, None,
                  "perf_event_attr.size {size} is newer than this kernel"),
        E.ESRCH: (KernelError, None, "no process with pid {pid}"),
        E.EINVAL: (KernelError, None, "an attr field is invalid for this event type (e.g. a "
                                      "uprobe offset outside the file, or a bad pid/cpu "
                                      "combination)"),
    },
    "mount": _each((E.EPERM, E.EACCES), (PermissionDeniedError, None, _MOUNT)),
}

#: operation -> the rule for errnos its :data:`RULES` do not list
OTHERWISE: dict[str, Rule] = {
    "BPF_LINK_CREATE": (AttachError, None, ""),
    "BPF_RAW_TRACEPOINT_OPEN": (AttachError, None, ""),
    "mount": (NotSupportedError, None, _MOUNT),
}


def _fill(template: str, context: dict[str, Any]) -> str | None:
    """``template`` filled in, or None when it names a keyword not given."""
    if "{perm}" in template:
        context = {**context, "perm": perm_hint()}
    if "{perf_perm}" in template:
        context = {**context, "perf_perm": perm_hint(perf=True)}
    try:
        return template.format_map(context)
    except (KeyError, IndexError):
        return None


def kernel_error(operation: str | int, err: int, detail: str = "",
                 **context: Any) -> KernelError:
    """The exception for ``operation`` (a name, or a :class:`Cmd` number) failing
    with ``err``, chosen by :data:`RULES` / :data:`OTHERWISE` / :data:`DEFAULT`.

    ``detail`` says what was being done; ``context`` fills the rule's templates.
    """
    op = operation if isinstance(operation, str) else cmd_name(operation)
    table = RULES.get(op)
    rule = table.get(err) if table is not None else None
    otherwise = OTHERWISE.get(op)
    if rule is None:
        rule = otherwise or DEFAULT.get(err, _PLAIN)
    cls, detail_t, hint_t = rule
    if cls is None:
        cls = (otherwise or DEFAULT.get(err, _PLAIN))[0]
        assert cls is not None
    ctx = {k: v for k, v in context.items() if v is not None}
    if detail_t is not None:
        detail = _fill(detail_t, ctx) or detail
    return cls(err, op, detail, _fill(hint_t, ctx) or "")


def error_for(err: int, operation: str, detail: str = "", hint: str = "",
              *, cls: type[KernelError] | None = None) -> KernelError:
    """Build the exception for a failed system call from :data:`DEFAULT`.

    ``err`` is the errno, ``operation`` names the call (``"BPF_MAP_CREATE"``),
    ``detail`` says what was being done, ``hint`` what to try (the errno's
    default hint when empty).  ``cls`` forces the class (and then no default
    hint is added).
    """
    if cls is None:
        rule_cls, _, hint_t = DEFAULT.get(err, _PLAIN)
        assert rule_cls is not None
        cls = rule_cls
        hint = hint or _fill(hint_t, {}) or ""
    return cls(err, operation, detail, hint)


def cmd_name(cmd: int) -> str:
    """``Cmd.MAP_CREATE`` -> ``"BPF_MAP_CREATE"`` (unknown: ``"BPF_#<n>"``)."""
    return "BPF_" + enum_name(Cmd, cmd)


def _read_sysctl(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def perm_hint(perf: bool = False) -> str:
    """What to try after EPERM/EACCES, from this process's privileges and the
    sysctls that restrict bpf() (``perf``: and perf_event_open)."""
    parts = []
    if os.geteuid() != 0:
        parts.append("run as root, or give the process CAP_BPF"
                     + (" and CAP_PERFMON" if perf else " (plus CAP_PERFMON for tracing "
                        "programs, CAP_NET_ADMIN for network ones)"))
        ub = _read_sysctl("/proc/sys/kernel/unprivileged_bpf_disabled")
        if ub and ub != "0":
            parts.append(f"kernel.unprivileged_bpf_disabled={ub} forbids bpf() "
                         "without CAP_BPF")
    else:
        parts.append("running as root, so a security policy (kernel lockdown, an LSM, "
                     "seccomp) or the object itself (read-only / frozen map) refuses this")
    if perf:
        para = _read_sysctl("/proc/sys/kernel/perf_event_paranoid")
        if para is not None:
            parts.append(f"kernel.perf_event_paranoid={para} (needs CAP_PERFMON "
                         "or a lower value)")
    return "; ".join(parts)


# ---------------------------------------------------------------- verifier
#: errnos of BPF_PROG_LOAD that, with a log, mean the verifier said no
VERIFIER_ERRNOS = (E.EACCES, E.EINVAL, E.E2BIG, E.EFAULT, E.ERANGE, E.ENOTSUP, ENOTSUPP)

#: log lines that are statistics, not the complaint
VERIFIER_NOISE = ("processed ", "verification time", "stack depth", "max_states_per_insn",
                  "mark_precise", "func#", "Live regs", "last_idx", "parent didn't",
                  "regs=", "from ")

_READ_WITH_HELPER = ("a plain number is dereferenced: kernel or user memory must be read "
                     "with bpf_probe_read_kernel/bpf_probe_read_user")
_PACKET_BOUNDS = ("prove the access is inside the packet first: compare the pointer plus "
                  "the bytes read with data_end (XDP: *(u32 *)(r1 + 4); skb: +80) and "
                  "branch away when it is past it")
_BOUNDED = "loops must be bounded so that the verifier can prove they end"

#: (needle in the verifier's message, hint); the first match wins
VERIFIER_HINTS = (
    ("R0 !read_ok", "r0 is the program's return value: set it (e.g. r0 = 0) before exit"),
    ("!read_ok", "a register is read before anything was written to it"),
    ("invalid mem access 'map_value_or_null'",
     "compare the result of bpf_map_lookup_elem with NULL before using it"),
    ("_or_null", "a pointer that may be NULL is used: check it against 0 first"),
    ("invalid mem access 'scalar'", _READ_WITH_HELPER),
    ("invalid mem access 'inv'", _READ_WITH_HELPER),
    ("outside of the packet", _PACKET_BOUNDS),
    ("invalid access to packet", _PACKET_BOUNDS),
    ("invalid func unknown#", "this kernel does not know that helper id"),
    ("cannot use helper", "that helper is not available to this program type"),
    ("unknown func", "that helper or kfunc is not available to this program type"),
    ("GPL", "this helper is GPL-only: load with license='GPL'"),
    ("unreachable insn", "remove dead code or fix the jump offsets"),
    ("back-edge", _BOUNDED),
    ("infinite loop", _BOUNDED),
    ("program is too large",
     "the verifier gave up after 1M instructions: a loop it cannot bound, or too many "
     "paths; bound loops with a counter (Program.bounded_loop) or may_goto"),
    ("jump out of range", "a jump targets an instruction outside the program"),
    ("invalid indirect read from stack",
     "stack memory passed to a helper must be initialised first"),
    ("invalid read from stack", "the stack slot is read before it was written"),
    ("invalid stack off", "stack accesses must be within r10-512 .. r10-1"),
    ("invalid bpf_context access",
     "the context (r1 at entry) was read at an offset or size this program type "
     "does not allow"),
    ("unbounded memory access",
     "check the index/length against a constant bound before using it"),
    ("min value is negative", "check that the index/length is >= 0 before using it"),
    ("too large", "the program or a value is too big: split the program"),
    ("misaligned", "the access is not aligned to its size"),
)


def verifier_message(log: str) -> str:
    """The verifier's last meaningful line (skips stats like ``processed N insns``)."""
    for line in reversed(log.splitlines()):
        s = line.strip()
        if not s or s.startswith(VERIFIER_NOISE):
            continue
        return s
    return ""


def verifier_hint(message: str, log: str = "") -> str:
    """What to try for a verifier message (``""`` when no needle matches);
    ``log``, the log the message ends, lets a dereference of a number that
    is the NULL of a tested pointer say so (the verifier calls it 'scalar')."""
    better = (_null_branch(message, log) or _packet_range(message, log)) if log else None
    if better:
        return better
    for needle, hint in VERIFIER_HINTS:
        if needle in message:
            return hint
    return ""


def _null_branch(message: str, log: str) -> str | None:
    """The hint for ``Rn invalid mem access 'scalar'`` when, on the log's
    walk, Rn held a pointer that may be NULL and was last set to 0: the
    access is on the branch where the NULL test found it NULL."""
    words = message.split()
    if len(words) < 4 or words[1:4] != ["invalid", "mem", "access"] \
            or words[4:5] not in (["'scalar'"], ["'inv'"]) or not words[0][1:].isdigit():
        return None
    reg = words[0]
    eq, eq_w = reg + "=", reg + "_w="
    maybe_null, last = False, None
    for line in log.splitlines():
        if reg not in line:
            continue
        for tok in line.split():
            if tok.startswith(eq) or tok.startswith(eq_w):
                last = tok.partition("=")[2]
                maybe_null = maybe_null or "_or_null" in last
    if not (maybe_null and last == "0"):
        return None
    r = "r" + reg[1:]
    return (f"{r} is NULL here: it held a pointer that may be NULL (a map lookup's result) "
            f"and the test before this found it 0; dereference it only on the branch where "
            f"it is not 0 (if {r} == 0 goto out, then the access)")


def _packet_range(message: str, log: str) -> str | None:
    """The hint for a packet access past what a bounds check proved: the
    kernel's ``invalid access to packet, off=20 size=1, R2(id=0,off=20,r=14)``
    says the check covered ``r`` bytes, the access needs ``off + size``."""
    if "outside of the packet" not in message and "invalid access to packet" not in message:
        return None
    import re
    found = re.findall(r"invalid access to packet, off=(-?\d+) size=(\d+), R\d+\([^)]*\br=(\d+)",
                       log)
    if not found:
        return None
    off, size, proved = (int(x) for x in found[-1])
    if proved <= 0 or off < 0:
        return None
    return (f"the bounds check before this proved {proved} bytes of the packet (r={proved}); "
            f"this access needs {off + size} (off={off} + size={size}): compare the pointer plus "
            f"{off + size} (not {proved}) with data_end before it")
