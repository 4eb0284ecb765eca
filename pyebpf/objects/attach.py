"""Attaching an object's program by its section name, as libbpf's
``bpf_program__attach`` does: ``tracepoint/CAT/NAME`` (``tp/``),
``raw_tp/NAME`` (``raw_tracepoint/``), ``kprobe/FUNC`` / ``kretprobe/FUNC``,
``uprobe/BINARY:SYMBOL`` / ``uretprobe/...`` (or a bare ``uprobe`` with
``binary`` and ``where`` given), ``usdt/BINARY:PROVIDER:NAME`` (libbpf's
USDT protocol, :mod:`.usdt`), ``perf_event`` (a sampling event), and the
BTF-targeted ``tp_btf/``, ``fentry/``, ``fexit/``, ``lsm/`` (a raw
tracepoint link on the target the program was loaded for)."""
from __future__ import annotations

import time

from .errors import ObjectError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .obj import ObjectProgram

__all__ = ["attach_program"]


def _target(prog: ObjectProgram) -> str:
    return prog.section.split("/", 1)[1] if "/" in prog.section else ""


def attach_program(prog: ObjectProgram, binary: str | None = None, where: Any = None,
                   **kw: Any) -> Any:
    """Attach ``prog`` where its section says; returns the
    :class:`~pyebpf.attach.link.Link`.  Uprobes take ``binary``/``where``
    (and :func:`~pyebpf.attach.attach_uprobe`'s keywords) when the section
    does not name them; perf_event programs take
    :func:`~pyebpf.attach.perf_event.attach_perf_event`'s keywords."""
    loaded = prog._require()
    kind = prog.kind
    target = _target(prog)
    if kind == "tracepoint":
        from ..attach.tracepoint import attach_tracepoint
        cat, _, name = target.partition("/")
        if not name:
            raise ObjectError(f"program {prog.name!r}: section {prog.section!r} does not name "
                              "a tracepoint as CATEGORY/NAME")
        return attach_tracepoint(loaded, f"{cat}:{name}", **kw)
    if kind == "raw_tracepoint":
        from ..attach.tracepoint import attach_raw_tracepoint
        return attach_raw_tracepoint(loaded, target)
    if kind in ("kprobe", "kretprobe"):
        from ..attach.perf_event import attach_kprobe
        return attach_kprobe(loaded, target, retprobe=kind == "kretprobe", **kw)
    if kind in ("uprobe", "uretprobe"):
        from ..attach.uprobe import attach_uprobe
        if binary is None:
            binary, sep, where = target.rpartition(":")
            if not sep or not binary:
                raise ObjectError(f"program {prog.name!r}: section {prog.section!r} names no "
                                  "BINARY:SYMBOL; give attach(binary, where)")
        return attach_uprobe(loaded, binary, where, retprobe=kind == "uretprobe", **kw)
    if kind == "usdt":
        from .usdt import attach_usdt_section
        if binary is not None or where is not None:
            raise ObjectError(f"program {prog.name!r}: attach a usdt program with "
                              "attach_usdt(binary, provider, name)")
        return attach_usdt_section(prog, **kw)
    if kind == "perf_event":
        from ..attach.perf_event import attach_perf_event
        return attach_perf_event(loaded, **kw)
    if kind in ("tp_btf", "fentry", "fexit", "fmod_ret", "lsm"):
        from ..attach.link import Link
        from ..kernel import syscall as _sys
        t0 = time.perf_counter()
        fd = _sys.raw_tracepoint_open(None, loaded.fileno())
        return Link(kind, target, "raw_tracepoint", [[fd]], program=loaded,
                    attach_seconds=time.perf_counter() - t0)
    raise ObjectError(f"program {prog.name!r} ({prog.section!r}): pyebpf cannot attach "
                      f"{kind} programs by their section name; attach obj.programs"
                      f"[{prog.name!r}] with the pyebpf.attach function for it")
