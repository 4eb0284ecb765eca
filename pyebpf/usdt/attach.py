"""Attach BPF programs to USDT probes: by path, library name or process.

A user writes a few lines::

    from pyebpf.usdt import usdt

    gc = usdt("/usr/bin/python3.11", "python:gc__start")     # or "gc__start"
    with gc.count() as c:                                    # counts every hit
        ...
    print(c.value)

    fe = usdt("python3.11", "python:function__entry")
    with fe.trace(strings={0: 128, 1: 64}) as t:             # arg0, arg1 as strings
        for filename, funcname, line in t:                   # (arg2: s32 line)
            ...

or builds the program itself with :meth:`Usdt.read_arg`::

    from pyebpf.program import Program, R1, R6, R7
    p = Program("lines")
    p.mov(R6, R1)                                 # keep ctx
    fe.read_arg(p, R7, 2, R6)                     # r7 = line number
    ...
    link = fe.attach(p)                           # loads it, attaches every location

Targets: a path; a library or program name (``libpython3.11``, ``python3.11``,
via :func:`pyebpf.elf.resolve_library`); or, with ``pid`` and no target,
every module the process maps that has the probe (as ``/proc/PID/root/...``
paths, so processes in containers work).  A wrong probe name raises
:class:`~pyebpf.errors.UsdtProbeLookupError` listing the probes that exist,
close matches first; ``provider=None`` means the only probe with that name.

Semaphores: each location is attached with its semaphore's file offset as
the uprobe ``ref_ctr_offset`` (uprobe_multi's ``ref_ctr_offsets``, or the
uprobe PMU's ``config`` bits 32-63).  The kernel then increments the
semaphore in every process that maps the file -- those running at attach
time and those started later -- and decrements it on detach.  No PID is
needed and nothing writes ``/proc/PID/mem`` (BCC's Python API and bpftrace
without ref_ctr support do both).

All the locations of one file are attached in **one** ``attach_uprobes``
call (one uprobe_multi link where the kernel has it), each with the BPF
cookie :class:`~pyebpf.usdt.args.ArgReader` chose (the spec group to read).
"""
from __future__ import annotations

import difflib
import os
import struct
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

if TYPE_CHECKING:
    from ..attach._programs import AttachableProgram, ProgramSource
    from ..attach.link import Link
    from ..kernel.syscall import Fd
    from ..loader import LoadedProgram
    from ..maps import PerCpuArrayMap

from .. import elf as _elf
from ..errors import UsdtError, UsdtNoteError, UsdtProbeLookupError, UsdtTargetError
from ..kernel.lifetime import Owner, close_all
from ..program import R1, R2, R3, R6, R7, R10, Program, Reg
from .args import ArgReader
from .notes import UsdtFile, UsdtNote, UsdtProbe

__all__ = ["Usdt", "usdt", "find_usdt", "attach_usdt", "usdt_files", "parse_probe_name",
           "UsdtCounter", "UsdtTrace"]


# ---------------------------------------------------------------------------
# names and targets

def parse_probe_name(text: str) -> tuple[str | None, str]:
    """``"provider:name"`` -> (provider, name); ``"name"`` -> (None, name)."""
    if not isinstance(text, str) or not text.strip():
        raise UsdtTargetError(f"a probe is named 'provider:name' or 'name', not {text!r}")
    provider, sep, name = text.strip().rpartition(":")
    if not name:
        raise UsdtTargetError(f"a probe is named 'provider:name' or 'name', not {text!r}")
    return (provider or None) if sep else None, name


def _parse_full(spec: str) -> tuple[str, str | None, str]:
    """``usdt:PATH:[PROVIDER:]NAME`` -> (path, provider, name)."""
    body = spec[len("usdt:"):] if spec.startswith("usdt:") else spec
    parts = body.split(":")
    if len(parts) == 3:
        return parts[0], parts[1] or None, parts[2]
    if len(parts) == 2:
        return parts[0], None, parts[1]
    raise UsdtTargetError(f"expected usdt:PATH:PROVIDER:NAME or usdt:PATH:NAME, not {spec!r}")


def _has_notes(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return False
        return UsdtFile(path).has_notes
    except (OSError, UsdtError):
        return False


def _process_files(pid: int) -> list[tuple[str, str]]:
    """(path to open, path shown in maps) of each distinct file process
    ``pid`` maps, by (device, inode): two files with the same name (memfds
    of one name, a replaced library) stay apart."""
    from ..elf.procmaps import open_path, process_maps
    try:
        entries = process_maps(pid)
    except ProcessLookupError:
        raise UsdtTargetError(f"no process {pid}") from None
    except OSError as exc:
        raise UsdtTargetError(f"cannot read the modules of process {pid}: {exc}") from None
    seen: dict[tuple[str, int], tuple[str, str]] = {}
    for m in entries:
        if not m.inode or not m.path.startswith("/"):
            continue
        key = (m.dev, m.inode)
        if key not in seen:
            seen[key] = (open_path(pid, m), m.path)
    return list(seen.values())


def usdt_files(target: "str | os.PathLike[str] | None", pid: int | None = None) -> list[str]:
    """The files to look for probes in.

    ``target``: a path, a library/program name (resolved like bpftrace, in
    the process's modules first when ``pid`` is given); None, ``""`` or
    ``"*"`` with ``pid``: every module of the process that has stapsdt notes.
    Raises :class:`~pyebpf.errors.UsdtTargetError`.
    """
    if target is not None:
        target = os.fspath(target)
    if target in (None, "", "*"):
        if pid is None:
            raise UsdtTargetError("give a target (a path, a library or program name) or a "
                                  "pid (every module the process maps)")
        mods = _process_files(pid)
        files = [path for path, _shown in mods if _has_notes(path)]
        if not files:
            raise UsdtTargetError(f"process {pid} maps no file with USDT probes "
                                  f"({len(mods)} modules: "
                                  + ", ".join(os.path.basename(shown) for _p, shown in mods[:8])
                                  + (", ..." if len(mods) > 8 else "") + ")")
        return files
    try:
        return [_elf.resolve_library(target, pid)]
    except (_elf.LibraryNotFoundError, ProcessLookupError) as exc:
        raise UsdtTargetError(f"cannot find the USDT target {target!r}: {exc}") from None


def _listing(probes: Sequence[UsdtProbe], wanted: str, limit: int = 40) -> tuple[list[str], str]:
    names = []
    for pr in probes:
        if pr.probe not in names:
            names.append(pr.probe)
    bare = wanted.rpartition(":")[2]
    close = difflib.get_close_matches(wanted, names, n=8, cutoff=0.5)
    close += [n for n in difflib.get_close_matches(bare, [n.rpartition(":")[2] for n in names],
                                                    n=8, cutoff=0.6)
              for n in [next(x for x in names if x.rpartition(":")[2] == n)] if n not in close]
    close += [n for n in names if bare and bare in n and n not in close]
    ordered = close + [n for n in names if n not in close]
    shown = ordered[:limit]
    text = ", ".join(shown) + (f", ... ({len(ordered)} in all)" if len(ordered) > limit else "")
    return ordered, text


def find_usdt(target: str | None, provider: str | None, name: str, *,
              pid: int | None = None, symbols: Mapping[str, int] | None = None) -> "Usdt":
    """Resolve ``provider:name`` in ``target`` (see :func:`usdt_files`).

    Raises :class:`~pyebpf.errors.UsdtProbeLookupError` (listing the probes
    that exist, close matches first) when the probe is absent, or when
    ``provider`` is None and several providers have a probe ``name``.
    """
    if not name:
        raise UsdtTargetError("empty probe name")
    files = usdt_files(target, pid)
    found: list[UsdtProbe] = []
    everything: list[UsdtProbe] = []
    errors = []
    for path in files:
        try:
            probes = UsdtFile(path).probes()
        except UsdtNoteError as exc:
            if len(files) == 1:
                raise
            errors.append(str(exc))
            continue
        except OSError as exc:
            raise UsdtTargetError(f"cannot read {path}: {exc}") from None
        everything += probes
        found += [pr for pr in probes if pr.name == name and
                  (provider is None or pr.provider == provider)]
    wanted = f"{provider}:{name}" if provider else name
    where = files[0] if len(files) == 1 else f"the {len(files)} modules of process {pid}"
    if not found:
        ordered, text = _listing(everything, wanted)
        msg = (f"no USDT probe {wanted!r} in {where}; " +
               (f"probes: {text}" if ordered else "the file has no USDT probes (no "
                ".note.stapsdt section)"))
        if errors:
            msg += f" (unreadable: {'; '.join(errors)})"
        raise UsdtProbeLookupError(msg, probe=wanted, target=where, candidates=ordered)
    providers = sorted({pr.provider for pr in found})
    if provider is None and len(providers) > 1:
        cands = [f"{p}:{name}" for p in providers]
        raise UsdtProbeLookupError(f"probe name {name!r} is ambiguous in {where}: "
                                   f"{', '.join(cands)}; name the provider",
                                   probe=name, target=where, candidates=cands)
    return Usdt(found, target=target, pid=pid, symbols=symbols)


def usdt(target: str | None, probe: str | None = None, *, pid: int | None = None,
         symbols: Mapping[str, int] | None = None) -> "Usdt":
    """The one-call entry point: ``usdt("/usr/bin/python3.11", "python:gc__start")``.

    ``probe`` is ``"provider:name"`` or ``"name"`` (the unique probe of that
    name).  ``usdt("usdt:PATH:PROVIDER:NAME")`` (bpftrace's syntax) works too.
    With ``pid``, the target is looked up among the process's modules, and
    ``target=None`` means all of them.  Returns a :class:`Usdt`.
    """
    if probe is None:
        if target is None:
            raise UsdtTargetError("give a probe name")
        target, provider, name = _parse_full(target)
    else:
        provider, name = parse_probe_name(probe)
    return find_usdt(target, provider, name, pid=pid, symbols=symbols)


# ---------------------------------------------------------------------------
# the probe

class Usdt:
    """One USDT probe, resolved in one or more files.

    Attributes:
        provider, name: the probe.
        probes: the :class:`~pyebpf.usdt.notes.UsdtProbe` of each file.
        locations: every site (:class:`~pyebpf.usdt.notes.UsdtNote`).
        reader: the :class:`~pyebpf.usdt.args.ArgReader` that emits argument
            reads and chose the cookies.
        pid: the process it was resolved for (None: every process).
    """

    def __init__(self, probes: Sequence[UsdtProbe], *, target: str | None = None,
                 pid: int | None = None, symbols: Mapping[str, int] | None = None) -> None:
        probes = list(probes)
        if not probes:
            raise UsdtTargetError("a Usdt needs at least one probe")
        self.probes = probes
        self.provider = probes[0].provider
        self.name = probes[0].name
        self.target = target
        self.pid = pid
        self.reader = ArgReader(probes, symbols=symbols)
        self.locations: tuple[UsdtNote, ...] = self.reader.locations

    # -- facts
    @property
    def paths(self) -> list[str]:
        """The files that hold the probe."""
        return [pr.path for pr in self.probes]

    @property
    def arg_count(self) -> int:
        """How many arguments the probe has (the most over its locations)."""
        return self.reader.arg_count

    @property
    def has_semaphore(self) -> bool:
        """Some location is guarded by a semaphore (attaching enables it)."""
        return any(n.semaphore for n in self.locations)

    @property
    def semaphore_offsets(self) -> list[int]:
        """The ref_ctr file offset of each location (0 = none)."""
        return [n.semaphore_offset for n in self.locations]

    def describe(self) -> str:
        """``usdt:/usr/bin/python3.11:python:function__entry (1 location, semaphore)``."""
        n = len(self.locations)
        path = self.paths[0] if len(self.paths) == 1 else \
            "{" + ",".join(self.paths) + "}"
        extra = [f"{n} location{'s' if n != 1 else ''}"]
        if len(self.paths) > 1:
            extra.append(f"{len(self.paths)} files")
        if self.has_semaphore:
            extra.append("semaphore")
        if self.pid is not None:
            extra.append(f"pid {self.pid}")
        groups = len(self.reader.groups)
        if groups > 1:
            extra.append(f"{groups} argument layouts")
        return f"usdt:{path}:{self.provider}:{self.name} ({', '.join(extra)})"

    def __repr__(self) -> str:
        return f"<Usdt {self.describe()}>"

    # -- programs
    def read_arg(self, p: Program, dst: Reg, n: int, ctx: Reg = R6, *,
                 float_bits: bool = False) -> None:
        """Emit ``dst = argument n`` (see :meth:`ArgReader.emit`)."""
        self.reader.emit(p, dst, n, ctx, float_bits=float_bits)

    def arg_signed(self, n: int) -> bool:
        """Whether argument ``n`` is signed (at any location)."""
        return any(getattr(s, "signed", False) for s in self.reader.specs(n) if s is not None
                   and s.decodable)

    def arg_size(self, n: int) -> int:
        """Argument ``n``'s size in bytes (the largest over the locations; 0 if
        it cannot be read anywhere)."""
        return max((s.size for s in self.reader.specs(n) if s is not None and s.decodable),
                   default=0)

    @staticmethod
    def load_options(method: str = "auto") -> dict[str, int]:
        """``prog_type`` and ``expected_attach_type`` for :func:`pyebpf.loader.load`."""
        from ..attach import uprobe_load_options
        return uprobe_load_options(method)

    def load(self, program: ProgramSource, *, method: str = "auto", **load_kw: Any
             ) -> LoadedProgram:
        """Load a DSL program with the options this kernel's attach mechanism needs."""
        from ..attach import load_uprobe_program
        return load_uprobe_program(program, method=method, **load_kw)

    def attach(self, prog: AttachableProgram, *, pid: int | None = None,
               method: str = "auto", cookies: Sequence[int] | None = None) -> Link:
        """Attach ``prog`` (loaded, or a DSL program to load) to every location.

        ``pid`` restricts the probe to one process (default: the pid this
        probe was resolved with, else every process).  ``cookies``: the BPF
        cookie of each location, in :attr:`locations` order (default: the
        ones :attr:`reader` dispatches on; a program that reads arguments
        some other way, as libbpf's ``usdt.bpf.h`` does, brings its own).
        Returns one :class:`pyebpf.attach.Link` (kind ``"usdt"``) for all
        files and locations; detaching it restores every semaphore.
        """
        from ..attach import Link, _is_loaded, attach_uprobes
        if pid is None:
            pid = self.pid
        if cookies is None:
            cookies = self.reader.cookies
        elif len(cookies) != len(self.locations):
            raise UsdtTargetError(f"cookies: one per location ({len(self.locations)}), "
                                  f"not {len(cookies)}")
        owned: LoadedProgram | None = None
        loaded: LoadedProgram | Fd | int
        if _is_loaded(prog):
            loaded = prog
        else:
            loaded = owned = self.load(prog, method=method)
        links = []
        i = 0
        try:
            for pr in self.probes:
                k = len(pr.locations)
                locs = pr.locations
                c = cookies[i:i + k]
                i += k
                refs = [n.semaphore_offset for n in locs]
                link = attach_uprobes(loaded, pr.path, [n.offset for n in locs],
                                      cookies=c if any(c) else None,
                                      ref_ctr_offsets=refs if any(refs) else None,
                                      pid=pid, method=method, check_boundary=False)
                links.append(link)
        except BaseException:
            for link in links:
                link.detach()
            if owned is not None:
                owned.close()
            raise
        target = f"usdt:{','.join(self.paths)}:{self.provider}:{self.name}"
        if len(links) == 1 and owned is None:
            link = links[0]
            link.kind, link.target = "usdt", target
            return link
        # one Link owning every file's attachments (and the program we loaded)
        groups = []
        for link in links:
            groups.extend(link._groups)
            link._disown()          # ownership moves to the merged link
        merged = Link("usdt", target, links[0].method, groups, program=loaded,
                      owns_program=owned is not None,
                      locations=[loc for link in links for loc in link.locations], pid=pid,
                      cookies=[c for link in links for c in link.cookies],
                      parallel_close=links[0].method != "uprobe_multi",
                      attach_seconds=sum(link.attach_seconds for link in links))
        return merged

    # -- recipes
    def count(self, *, pid: int | None = None) -> "UsdtCounter":
        """Count hits in the kernel (a per-CPU counter); see :class:`UsdtCounter`."""
        return UsdtCounter(self, pid=pid)

    def trace(self, args: Sequence[int] | None = None, *,
              strings: Mapping[int, int] | Iterable[int] | None = None,
              pid: int | None = None, **reader_kw: Any) -> "UsdtTrace":
        """Stream the arguments of every hit; see :class:`UsdtTrace`."""
        return UsdtTrace(self, args, strings=strings, pid=pid, **reader_kw)


def attach_usdt(prog: AttachableProgram, target: str | None, provider: str | None,
                name: str, *, pid: int | None = None, method: str = "auto",
                symbols: Mapping[str, int] | None = None) -> Link:
    """Attach ``prog`` to USDT probe ``provider:name`` of ``target``.

    ``target`` is a path, a library name (``libpython3.11``) or a program
    name, or None with ``pid`` for every module of that process.  ``prog``
    should read arguments through the same probe's reader
    (``find_usdt(...).read_arg``): the cookies given to each location are
    the ones that reader dispatches on.  Returns a :class:`pyebpf.attach.Link`.
    """
    return find_usdt(target, provider, name, pid=pid, symbols=symbols).attach(
        prog, pid=pid, method=method)


# ---------------------------------------------------------------------------
# recipes

class _Recipe(Owner):
    """A recipe's kernel objects (map or reader, program, link), closed in
    reverse order of creation (an :class:`~pyebpf.kernel.lifetime.Owner`)."""

    def __init__(self) -> None:
        self._closers: list[Any] = []
        self._own(close_all, self._closers)
        self.link: Any = None

    def _load_and_attach(self, probe: Usdt, p: Program, pid: int | None) -> None:
        """Load ``p`` and attach it to ``probe``; both become owned."""
        self.program = probe.load(p)
        self._closers.append(self.program)
        self.link = probe.attach(self.program, pid=pid)
        self._closers.append(self.link)

    def close(self) -> None:
        """Detach and free everything (idempotent)."""
        super().close()

    detach = close


class UsdtCounter(_Recipe):
    """Counts the hits of a probe in a per-CPU array; ``value`` sums the CPUs.

    The program is the DSL's own idiom, :meth:`~pyebpf.program.Program.map_increment`
    on element 0 of a :class:`~pyebpf.maps.PerCpuArrayMap`: the USDT layer
    depends on the program and map layers only, never on :mod:`pyebpf.trace`.
    """

    def __init__(self, probe: Usdt, *, pid: int | None = None) -> None:
        super().__init__()
        from ..maps import PerCpuArrayMap
        self.probe = probe
        self._final: int | None = None
        self.map: PerCpuArrayMap | None = None
        try:
            self.map = PerCpuArrayMap("u64", 1, name=f"usdt_{probe.name}"[:15])
            self._closers.append(self.map)
            p = Program("usdt_count")
            key = p.stack.alloc(8)
            p.store(R10, key, 0, 4)
            p.map_increment(self.map, key)
            p.ret(0)
            self._load_and_attach(probe, p, pid)
        except BaseException:
            self.close()
            raise

    def _read(self) -> int:
        m = self.map
        if m is None:
            return 0
        total: int = sum(m[0])
        return total

    @property
    def value(self) -> int:
        """Hits so far (after :meth:`close`, the count at detach)."""
        if self._final is not None:
            return self._final
        return self._read()

    def close(self) -> None:
        """Detach (the count stays readable in :attr:`value`) and free the map."""
        super().close()

    def _close_resources(self) -> None:
        if self._final is None and self.map is not None and self.link is not None:
            try:
                if not self.link.closed:
                    self.link.detach()
                self._final = self._read()
            except Exception:  # noqa: BLE001 - closing must not fail
                pass


def _string_sizes(strings: Mapping[int, int] | Iterable[int] | None) -> dict[int, int]:
    if strings is None:
        return {}
    if isinstance(strings, Mapping):
        return {int(k): int(v) for k, v in strings.items()}
    return {int(k): 64 for k in strings}


class _EventDecoder:
    """A :class:`UsdtTrace` record's bytes -> the tuple of its arguments."""

    def __init__(self, layout: list[tuple[int, int, int]], signed: dict[int, bool]) -> None:
        self.layout = layout
        self.signed = signed

    def __call__(self, raw: bytes) -> tuple[Any, ...]:
        out = []
        for i, off, n in self.layout:
            if n:
                s = raw[off:off + n]
                z = s.find(b"\0")
                out.append((s if z < 0 else s[:z]).decode("utf-8", "replace"))
            else:
                out.append(struct.unpack_from("<q" if self.signed[i] else "<Q", raw, off)[0])
        return tuple(out)


class UsdtTrace(_Recipe):
    """Streams the arguments of every hit through a perf buffer.

    Each event is a tuple with one item per requested argument: an int
    (signed per its spec) or, for the indices in ``strings`` (``{index:
    max_bytes}`` or a list of indices for 64 bytes), the ``str`` the
    argument points to (read with ``bpf_probe_read_user_str``, decoded as
    UTF-8 with replacement).  Iterate, or call :meth:`read` / :meth:`drain`.
    Float arguments cannot be read (see :mod:`pyebpf.usdt.args`): leave
    them out of ``args``.
    """

    def __init__(self, probe: Usdt, args: Sequence[int] | None = None, *,
                 strings: Mapping[int, int] | Iterable[int] | None = None,
                 pid: int | None = None, **reader_kw: Any) -> None:
        super().__init__()
        from ..events import PerfBuffer
        self.probe = probe
        sizes = _string_sizes(strings)
        if args is None:
            args = list(range(probe.arg_count))
        self.args = list(args)
        for i in self.args:
            probe.reader.check(i)
        pos = 0
        layout = []                 # (arg, offset, string size or 0 for a u64)
        for i in self.args:
            if i in sizes:
                n = sizes[i]
                if not 1 <= n <= 256:
                    raise UsdtTargetError(f"string size for argument {i} must be 1..256")
                layout.append((i, pos, n))
                pos += (n + 7) // 8 * 8
            else:
                layout.append((i, pos, 0))
                pos += 8
        if pos > 480:
            raise UsdtTargetError(f"the record would take {pos} bytes of the 512-byte BPF "
                                  "stack; ask for fewer or shorter strings")
        self.record_size = max(pos, 8)
        self._layout = layout
        self._signed = {i: probe.arg_signed(i) for i in self.args}
        try:
            # (the decoder must not refer to self: the reader is owned, and an
            # owner's resources never keep it alive)
            self.reader = PerfBuffer(decode=_EventDecoder(layout, self._signed), **reader_kw)
            self._closers.append(self.reader)
            p = Program("usdt_trace")
            p.mov(R6, R1)
            base = p.stack.alloc(self.record_size, 8)
            if any(n for _i, _o, n in layout):
                p.stack_zero(self.record_size, base)     # no stale stack bytes in events
            for i, off, n in layout:
                probe.read_arg(p, R7, i, R6)
                if n:
                    p.mov(R1, R10)
                    p.add(R1, base + off)
                    p.mov(R2, n)
                    p.mov(R3, R7)
                    p.call("probe_read_user_str")
                else:
                    p.store(R10, base + off, R7, 8)
            if not layout:
                p.store(R10, base, 0, 8)
            p.perf_event_output(self.reader.array, base, self.record_size, ctx=R6)
            p.ret(0)
            self._load_and_attach(probe, p, pid)
        except BaseException:
            self.close()
            raise

    def read(self, timeout: float | None = None) -> list[tuple[Any, ...]]:
        """Wait up to ``timeout`` seconds (None: forever) for events; return them."""
        return self.reader.read_batch(timeout)

    def drain(self) -> list[tuple[Any, ...]]:
        """The events waiting now (no wait)."""
        return self.reader.drain()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.reader)

    @property
    def lost(self) -> int:
        """Events the kernel could not deliver (the ring was full)."""
        return self.reader.lost
