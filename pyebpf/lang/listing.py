"""``bt -l [PATTERN] [-p PID]``: the probes a pattern names, one per line,
as ``bpftrace -l`` lists them.

A pattern is a comma-separated list of attach points, each
``KIND:PART:...`` with ``*`` wildcards anywhere:

- the kind may be a wildcard too (``*ware:*``, ``*:./app:*``): it stands for
  the user-space kinds (``uprobe``, ``usdt``) when a PID is given or the
  next part is a path (has a ``/``), else for the kernel's (``hardware``,
  ``software``, ``tracepoint``); a kind whose number of parts the pattern
  does not fit is then left out, as bpftrace leaves it out;
- a file may be a wildcard (``uprobe:./bin/app*:main``): every ELF file it
  matches;
- with ``-p PID``: ``uprobe:FUNC`` lists the process's executable,
  ``usdt:*`` (and ``usdt:PATTERN:...``) every module the process maps (its
  libraries too), named through ``/proc/PID/root`` as bpftrace names them;
  a path is the one the process sees (in its own mount namespace);
- a pattern without a kind (no ``:``) matches the names of tracepoints and
  software and hardware events.

Differences from bpftrace 0.17, where it prints a literal pattern:
``software:*`` and ``hardware:*`` list each event (bpftrace prints
``software:*:``).  Hardware events are listed whether or not the CPU has a
PMU, as bpftrace lists them (attaching one needs it).
"""
from __future__ import annotations

import os

from ..probes.sources import ProbeSpecError
from .probes import HARDWARE_EVENTS, SOFTWARE_EVENTS, _canonical, _match, _tracepoint_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["list_probes"]

#: the kinds a wildcard kind stands for (bpftrace's, return kinds left out; no kprobes here)
USER_KINDS = ("uprobe", "usdt")
KERNEL_KINDS = ("hardware", "software", "tracepoint")


def list_probes(pattern: str | None = None, *, pid: int | None = None,
                verbose: bool = False) -> list[str]:
    """What ``bpftrace -l [PATTERN] [-p PID]`` lists (see the module docs):
    ``tracepoint:CAT:NAME``, ``software:EVENT:``, ``hardware:EVENT:``,
    ``uprobe:PATH:FUNC``, ``usdt:PATH:PROVIDER:NAME``.  ``verbose``
    (``-lv``): after each uprobe, its function's parameters from the
    program's DWARF (``    int argc``), and after each tracepoint its
    fields, as bpftrace indents them.

    Raises :class:`~pyebpf.lang.errors.LangError` for a character no attach
    point may hold (bpftrace's ``invalid character``) and
    :class:`~pyebpf.probes.sources.ProbeSpecError` for a pattern that names
    no kind or a missing file."""
    search = pattern or "*:*"
    if search == "*":
        search = "*:*"
    _check_characters(search)
    out: list[str] = []
    for text in search.split(","):
        text = text.strip()
        if not text:
            continue
        if ":" not in text:
            out += _bare(text)
            continue
        out += _list_point(text, pid)
    return _with_params(out) if verbose else out


def _with_params(names: list[str]) -> list[str]:
    """``names`` with the parameters of each uprobe (DWARF) and the fields of
    each tracepoint after it, indented by four spaces."""
    out = []
    for name in names:
        out.append(name)
        kind, _, rest = name.partition(":")
        if kind in ("uprobe", "uretprobe"):
            path, _, func = rest.rpartition(":")
            out += [f"    {p.type.c_name()} {p.name}" for p in _params(path, func)]
        elif kind == "tracepoint":
            from ..attach import tracepoint_format
            out += [f"    __data_loc {f.type}[] {f.name}" if f.data_loc else
                    f"    {f.type} {f.name}" + (f"[{f.array_len}]" if f.array_len else "")
                    for f in tracepoint_format(rest).fields if not f.common]
    return out


def _params(path: str, func: str) -> list[Any]:
    from ..elf.dwarf import dwarf_types
    try:
        return dwarf_types(path).function_params(func) or []
    except OSError:
        return []


def _check_characters(search: str) -> None:
    """bpftrace's lexer refuses characters no attach point may hold."""
    from .errors import LangError
    from .lexer import tokenize
    _, errors = tokenize(search)
    if errors:
        raise LangError.collected(errors)


def _bare(text: str) -> list[str]:
    """A pattern without a kind: matched against the names of tracepoints
    (``CAT:NAME``) and events, and against whole names."""
    out = []
    for kind in ("tracepoint", "software", "hardware"):
        out += [p for p in _list_kind(kind, ["*"] * (2 if kind == "tracepoint" else 1), None)
                if _match(text, p.split(":", 1)[1].rstrip(":")) or _match(text, p)]
    return out


def _list_point(text: str, pid: int | None) -> list[str]:
    kind_text, *parts = text.split(":")
    if "*" not in kind_text:
        return _list_kind(_canonical(kind_text), parts, pid)
    user = pid is not None or (bool(parts) and "/" in parts[0])
    kinds = [k for k in (USER_KINDS if user else KERNEL_KINDS) if _match(kind_text, k)]
    if not kinds:
        raise ProbeSpecError(f"No probe type matched for {kind_text}")
    if len(kinds) == 1:
        return _list_kind(kinds[0], parts, pid)
    out: list[str] = []
    for kind in kinds:                 # (one a pattern does not fit is left out)
        if len(parts) in _part_counts(kind, pid):
            out += _list_kind(kind, parts, pid)
    return out


def _part_counts(kind: str, pid: int | None) -> tuple[int, ...]:
    """How many parts after the kind an attach point of ``kind`` has."""
    if kind in ("uprobe", "uretprobe"):
        return (1, 2) if pid is not None else (2,)
    if kind == "usdt":
        return (1, 2, 3) if pid is not None else (2, 3)
    return (1, 2)


def _list_kind(kind: str, parts: list[str], pid: int | None) -> list[str]:
    if kind == "tracepoint":
        if len(parts) == 1:
            parts = ["*", parts[0]] if parts[0] else ["*", "*"]
        pat = ":".join(parts[:2]) if parts else "*:*"
        return [f"tracepoint:{t}" for t in _tracepoint_names() if _match(pat, t)]
    if kind in ("software", "hardware"):
        table = HARDWARE_EVENTS if kind == "hardware" else SOFTWARE_EVENTS
        pat = parts[0] if parts and parts[0] else "*"
        return [f"{kind}:{n}:" for n in sorted(table)
                if _match(pat, n) or any(_match(pat, a) for a in table[n][0])]
    if kind in ("uprobe", "uretprobe"):
        return _uprobes(kind, parts, pid)
    if kind == "usdt":
        return _usdt(parts, pid)
    if kind in ("kprobe", "kretprobe", "kfunc", "kretfunc", "rawtracepoint"):
        return []
    raise ProbeSpecError(f"{kind!r} is not a probe type bpftrace -l lists (tracepoint, "
                         "software, hardware, uprobe, usdt)")


# ================================================================ uprobes
def _uprobes(kind: str, parts: list[str], pid: int | None) -> list[str]:
    from .probes import _functions, _shown_path
    if len(parts) == 1 and pid is not None:
        files = [_executable(pid)]
        pat = parts[0] or "*"
    else:
        if len(parts) < 2 or not parts[0]:
            raise ProbeSpecError(f"{kind} probe type requires 2 arguments: "
                                 f"{kind}:PATH:FUNCTION")
        pat = parts[1] if len(parts) > 1 and parts[1] else "*"
        files = [(f, f) for f in _files(parts[0], pid)] if "*" in parts[0] \
            else [_shown_path(parts[0], pid)]
    return [f"{kind}:{shown}:{n}" for real, shown in files for n in _functions(real)
            if _match(pat, n)]


def _executable(pid: int) -> tuple[str, str]:
    """Process ``pid``'s executable: (a path usable from here, the path
    shown: through ``/proc/PID/root``, as bpftrace shows it)."""
    from ..elf import process_modules
    try:
        mods = process_modules(pid)
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except (ProcessLookupError, OSError) as exc:
        raise ProbeSpecError(f"cannot read the modules of process {pid}: {exc}") from None
    if not mods:
        raise ProbeSpecError(f"process {pid} maps no file")
    return mods[0].open_path, f"/proc/{pid}/root{exe}"


def _files(pattern: str, pid: int | None) -> list[str]:
    from ..elf import expand_path
    files = expand_path(pattern, pid)
    if not files:
        raise ProbeSpecError(f"{pattern}: no ELF file matches")
    return files


# =================================================================== USDT
def _usdt(parts: list[str], pid: int | None) -> list[str]:
    if pid is not None and len(parts) == 1:
        parts = ["", parts[0]]
    if not parts or (not parts[0] and pid is None) or len(parts) > 3:
        raise ProbeSpecError("usdt probe type requires 2 or 3 arguments: "
                             "usdt:PATH[:PROVIDER]:NAME")
    target = parts[0]
    prov, name = ("*", parts[1] or "*") if len(parts) == 2 else \
        (parts[1] or "*", parts[2] or "*")
    found: list[str] = []
    for real, shown in _usdt_files(target, pid):
        found += [f"{shown}:{p}:{n}" for p, n in _usdt_names(real)
                  if _match(prov, p) and _match(name, n)]
    return [f"usdt:{x}" for x in sorted(found)]


def _usdt_files(target: str, pid: int | None) -> list[tuple[str, str]]:
    """(file, path shown) of each file a USDT pattern's target names."""
    if pid is None:
        if "*" in target:
            return [(f, f) for f in _files(target, None)]
        from .probes import _shown_path
        return [_shown_path(target, None)]
    if target and "*" not in target and "/" not in target:
        from .probes import _usdt_files as by_name
        return by_name(target, pid)
    from ..errors import UsdtError
    from ..usdt.attach import usdt_files
    try:
        mods = usdt_files(None, pid)
    except UsdtError as exc:
        if os.path.exists(f"/proc/{pid}/maps"):
            return []                  # (a process without USDT probes)
        raise ProbeSpecError(str(exc)) from None
    root = f"/proc/{pid}/root"
    want = None if target in ("", "*") else os.path.abspath(target)
    out = []
    for f in mods:
        seen = f[len(root):] if f.startswith(root + "/") else f
        if want is None or _match(want, seen) or _match("*" + want, seen):
            out.append((f, f if f.startswith("/proc/") else root + f))
    return out


def _usdt_names(path: str) -> list[tuple[str, str]]:
    from ..errors import UsdtError
    from ..usdt.notes import UsdtFile
    try:
        probes: Any = UsdtFile(path).probes()
    except (UsdtError, OSError) as exc:
        raise ProbeSpecError(f"{path}: {exc}") from None
    return sorted({(p.provider, p.name) for p in probes})
