"""The compiled-program cache of ``pyebpf bt``: what the kernel was given
for a program that compiled and started, kept so that the next start of the
same program skips the lexer, parser, semantic pass, code generation and
ELF reading (:mod:`pyebpf.lang.fastpath` runs it).

An entry is a :mod:`marshal` file under ``$XDG_CACHE_HOME/pyebpf/bt/``
(``~/.cache/pyebpf/bt/``), named by a hash of its :func:`cache_key`: the
program's text, file name and parameters, the options that change the
generated code, pyebpf's version and its package files (names, sizes and
modification times), the kernel's release and boot (kernel addresses and
tracepoint ids change with it), the working directory, ``PATH`` and
``LD_LIBRARY_PATH`` (how a binary's name is found). The entry holds the key
itself (a hash collision is a miss) and, for each probed file, its
``(device, inode, size, mtime_ns)``: a binary or library changed since is a
miss. What cannot be cached (see :func:`entry_of`) is simply not stored.

Entries are written atomically (a temporary file, then a rename), mode
0600 in a 0700 directory; a corrupt or foreign entry is ignored; at most
:data:`MAX_ENTRIES` are kept (the least recently used go first).
``pyebpf bt --no-cache`` or ``PYEBPF_NO_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import marshal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

__all__ = ["cache_dir", "cache_key", "load", "store", "entry_of", "MAX_ENTRIES", "FORMAT"]

#: the entries kept (the least recently used beyond it are removed when one
#: is written; an entry is a few KiB)
MAX_ENTRIES = 256
#: the entry format's name: an entry of another format is ignored
FORMAT = "pyebpf-bt-cache-1"
#: the action kinds an entry may hold (the others need the compiler's data)
ACTIONS = frozenset({"printf", "time", "exit", "print", "print_value", "clear", "zero", "join"})
#: type kinds printed with the help of symbols or stacks: not cached
_UNCACHED_KINDS = frozenset({"ustack", "kstack", "usym", "ksym", "pystack"})
#: BPF_TRACE_UPROBE_MULTI: the uprobe attach method an entry may hold
_UPROBE_MULTI = 48


def disabled(no_cache: bool = False) -> bool:
    """True when the cache is off (``--no-cache``, ``PYEBPF_NO_CACHE``)."""
    return no_cache or os.environ.get("PYEBPF_NO_CACHE", "") not in ("", "0")


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/pyebpf/bt`` (``~/.cache/pyebpf/bt`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyebpf", "bt")


#: pyebpf's packages that compiling a bpftrace program never imports (their
#: files are not part of the key)
_NOT_COMPILING = frozenset({"__pycache__", "cli", "trace", "profile", "export", "demo", "vm",
                            "text", "objects"})


def _package_stamp() -> tuple[Any, ...]:
    """pyebpf's version and every file of the packages that compile a
    program: (name, size, mtime_ns)."""
    from .. import __version__
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files: list[tuple[str, int, int]] = []
    todo = [root]
    while todo:
        with os.scandir(todo.pop()) as it:
            for entry in it:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    files.append((entry.path, st.st_size, st.st_mtime_ns))
                elif entry.is_dir() and entry.name not in _NOT_COMPILING:
                    todo.append(entry.path)
    files.sort()
    return (__version__, tuple(files))


def _boot_id() -> bytes:
    try:
        fd = os.open("/proc/sys/kernel/random/boot_id", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:                 # (os.read: a text-mode open costs ~100 times more)
        return os.read(fd, 64).strip()
    finally:
        os.close(fd)


def cache_key(text: str, filename: str, params: Sequence[str], unsafe: bool) -> tuple[Any, ...]:
    """Everything the generated programs depend on besides the probed files
    (see the module docs), as a tuple that :mod:`marshal` writes."""
    env = os.environ
    return (FORMAT, text, filename, tuple(params), bool(unsafe), _package_stamp(),
            os.uname().release, _boot_id(), os.getcwd(), env.get("PATH", ""),
            env.get("LD_LIBRARY_PATH", ""), _stat("/etc/ld.so.cache"))


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _path(key: tuple[Any, ...]) -> str:
    # (zlib: loaded already, with cffi; hashlib costs ~2 ms. A collision is
    # only a miss: the entry holds its key)
    import zlib
    data = marshal.dumps(key)
    return os.path.join(cache_dir(), "%08x%08x" % (zlib.crc32(data), zlib.adler32(data)))


def load(key: tuple[Any, ...]) -> dict[str, Any] | None:
    """The entry stored under ``key``, or None: none, unreadable, corrupt,
    of another key or format, or a probed file changed since."""
    path = _path(key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        # the entry's code is loaded into the kernel: only a file and folder
        # this user owns and no one else may write are trusted
        if not (_private(os.fstat(fd)) and _private(os.stat(os.path.dirname(path)))):
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            entry = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        for probed, stamp in entry["files"]:
            if _stat(probed) != stamp:
                return None
    except (KeyError, TypeError, ValueError):
        return None
    try:
        os.utime(path)           # (used now: the eviction keeps the recently used)
    except OSError:
        pass
    return entry


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def store(key: tuple[Any, ...], entry: dict[str, Any]) -> None:
    """Write ``entry`` under ``key`` (atomically, mode 0600), then remove
    the least recently used entries beyond :data:`MAX_ENTRIES`. A failure
    to write is silent: the cache only saves time."""
    path = _path(key)
    folder = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not _private(os.stat(folder)):
            return                       # (a folder others may write: not trusted, not used)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(dict(entry, key=key)))
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _evict(folder)


def _evict(folder: str) -> None:
    """Remove the least recently used entries beyond :data:`MAX_ENTRIES`
    (an entry's modification time is its last use)."""
    try:
        with os.scandir(folder) as it:
            found = [(e.stat().st_mtime_ns, e.path) for e in it if e.is_file()]
    except OSError:
        return
    found.sort()
    for _, old in found[:max(len(found) - MAX_ENTRIES, 0)]:
        try:
            os.unlink(old)
        except OSError:
            pass


# ------------------------------------------------------------ writing an entry
class _Uncacheable(Exception):
    """A program the fast path does not run (the entry is not written)."""


def encode_type(t: Any) -> tuple[Any, ...] | None:
    """A :class:`~pyebpf.lang.types.Type` as nested tuples (marshal writes
    them; :func:`pyebpf.lang.fastpath.decode_type` reads them back)."""
    if t is None:
        return None
    if t.struct is not None or t.kind in _UNCACHED_KINDS:
        raise _Uncacheable(f"type {t.kind}")
    return (t.kind, t.size, t.signed, tuple(encode_type(e) for e in t.elems),
            encode_type(t.elem), tuple((n, o, encode_type(f)) for n, o, f in t.fields),
            t.stack_mode, t.stack_limit, t.lhist, t.counted, t.fmt)


def entry_of(run: Any, warnings: Sequence[str]) -> dict[str, Any] | None:
    """What the fast path needs to start the program of the started
    :class:`~pyebpf.lang.runtime.BtRun` ``run`` again, or None when it is
    not cacheable: a probe other than BEGIN, END and uprobes attached by
    ``uprobe_multi``, stacks, symbols, C structs, ``-k`` reports."""
    try:
        return _entry(run, list(warnings))
    except (_Uncacheable, AttributeError, TypeError, ValueError, LookupError, OSError):
        return None              # (the run goes on: the cache only saves time)


def _entry(run: Any, warnings: list[str]) -> dict[str, Any]:
    from ..isa import opcodes as op
    from ..kernel.core import obj_name
    unit = run.unit
    if unit.stack_map is not None or unit.kstack_map is not None or unit.drops is not None \
            or unit.helper_check or run.pid is not None or run.child is not None:
        raise _Uncacheable("stacks, -k, -p or -c")
    specs = unit.all_map_specs()
    knames = list(specs)
    maps = [(n, int(s.map_type), s.key_size, s.value_size, s.max_entries, s.flags)
            for n, s in specs.items()]
    files: dict[str, Any] = {}
    probes = []
    for plan, loaded in zip(unit.probes, run.loaded):
        source = plan.source
        attach = None
        if source is not None:
            if getattr(source, "kind", None) not in ("uprobe", "uretprobe") or \
                    loaded.expected_attach_type != _UPROBE_MULTI or \
                    getattr(source, "setup", None) is not None or hasattr(source, "usdt"):
                raise _Uncacheable(f"probe {plan.name}")
            for p in {source.path, source.binary} if "/" in source.binary else {source.path}:
                files[p] = _stat(p)
                if files[p] is None:
                    raise _Uncacheable(f"{p} is gone")
            attach = (source.kind, source.path, [loc.file_offset for loc in source.locations])
        code = bytearray()
        relocs = []
        for insn in loaded.insns:
            if insn.map_ref is not None:
                if insn.src not in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_IDX):
                    raise _Uncacheable("a map value reference")
                relocs.append((len(code), knames.index(insn.map_ref)))
                insn = insn.copy()
                insn.src = op.PSEUDO_MAP_FD
                insn.imm = 0
            code += insn.encode()
        probes.append((plan.name, plan.kind, loaded.prog_type, loaded.expected_attach_type,
                       obj_name(loaded.name or ""), getattr(loaded.program, "license", "GPL"),
                       bytes(code), relocs, attach))
    actions = []
    for a in unit.actions:
        if a.kind not in ACTIONS:
            raise _Uncacheable(f"action {a.kind}")
        actions.append((a.kind, a.fmt, [encode_type(t) for t in a.args], a.map,
                        list(a.params), dict(a.strftime)))
    plans = {name: (p.kname, p.kind, encode_type(p.key), encode_type(p.value), p.key_size,
                    p.value_size) for name, p in unit.maps.items()}
    return {"format": FORMAT, "files": sorted(files.items()), "maps": maps,
            "ringbuf": unit.ringbuf.name, "probes": probes, "actions": actions,
            "plans": plans, "probe_names": list(unit.probe_names), "warnings": warnings}
