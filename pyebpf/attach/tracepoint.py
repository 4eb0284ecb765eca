"""Tracepoints: names, record formats, attaching; raw tracepoints.

A tracepoint (``"category:event"``) is attached through a tracepoint perf
event whose id tracefs gives (:func:`tracepoint_id`); its program's context
is the record :func:`tracepoint_format` describes.  A raw tracepoint is
opened by name with ``BPF_RAW_TRACEPOINT_OPEN`` (no tracefs); its context is
the tracepoint's raw ``u64`` arguments.
"""
from __future__ import annotations

import errno as E
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._programs import AttachableProgram

from .._record import Record, record
from ..errors import (AttachError, KernelError, OptionError, ProgramError, UnknownNameError,
                      close_matches)
from ..kernel import perf
from ..kernel import syscall as _sys
from ..kernel.constants import ProgType
from ._programs import prepare, prog_fd
from .link import Link
from .perf_event import attach_one_event
from .tracefs import tracefs_dir

__all__ = ["list_tracepoints", "tracepoint_id", "tracepoint_format", "parse_tracepoint_format",
           "TracepointField", "TracepointFormat", "attach_tracepoint",
           "list_raw_tracepoints", "attach_raw_tracepoint"]


def _split_tp(name: str) -> tuple[str, str]:
    text = name.strip()
    for prefix in ("tracepoint:", "t:"):
        if text.startswith(prefix) and text.count(":") == 2:
            text = text[len(prefix):]
    sep = ":" if ":" in text else "/"
    cat, s, event = text.partition(sep)
    if not s or not cat or not event or sep in event:
        raise OptionError(f"a tracepoint is named 'category:event' (e.g. "
                          f"'syscalls:sys_enter_openat'), not {name!r}")
    return cat, event


def list_tracepoints(category: str | None = None) -> list[str]:
    """Every tracepoint as ``"category:event"`` (mounts tracefs if needed)."""
    events = os.path.join(tracefs_dir(), "events")
    cats = [category] if category else sorted(os.listdir(events))
    out = []
    for c in cats:
        d = os.path.join(events, c)
        try:
            names = sorted(os.listdir(d))
        except (NotADirectoryError, FileNotFoundError):
            continue
        out += [f"{c}:{n}" for n in names if os.path.isdir(os.path.join(d, n))]
    return out


def _tp_dir(name: str) -> tuple[str, str, str]:
    cat, event = _split_tp(name)
    d = os.path.join(tracefs_dir(), "events", cat, event)
    if not os.path.isfile(os.path.join(d, "id")):
        full = f"{cat}:{event}"
        in_cat = list_tracepoints(cat) if os.path.isdir(os.path.dirname(d)) else []
        everything = list_tracepoints()
        close = close_matches(full, in_cat, n=5, cutoff=0.6) or \
            close_matches(full, everything, n=5, cutoff=0.6)
        if not close and not in_cat:
            close = close_matches(cat, sorted({t.split(':')[0] for t in everything}),
                                              n=3, cutoff=0.6)
            close = [f"category {c}" for c in close]
        raise AttachError(E.ENOENT, "tracepoint", f"no tracepoint {full!r} "
                          f"({len(everything)} exist)",
                          ("close matches: " + ", ".join(close)) if close else
                          "list them with pyebpf.attach.list_tracepoints()")
    return cat, event, d


def tracepoint_id(name: str) -> int:
    """The perf event id of tracepoint ``"category:event"`` (from tracefs)."""
    _c, _e, d = _tp_dir(name)
    with open(os.path.join(d, "id")) as f:
        return int(f.read().strip())


# (duplicates: deliberate, a record's fields one a line, alike by shape with elf.Symbol's)
@record
class TracepointField(Record):
    """One field of a tracepoint's record (the context of a TRACEPOINT program).

    ``type`` is the C declaration's type (``"const char *"``), ``array_len``
    the element count of a fixed array, ``data_loc`` marks a
    ``__data_loc`` field (a u32: offset of the data in the low 16 bits,
    length in the high 16).
    """

    name: str
    type: str
    offset: int
    size: int
    signed: bool
    array_len: int | None = None
    data_loc: bool = False
    common: bool = False

    def load(self, program: Any, dst: Any, ctx: Any = None) -> Any:
        """Emit ``dst = ctx->field`` (default ctx ``r1``) with the field's width,
        sign-extended when the field is signed."""
        if self.array_len is not None:
            raise ProgramError(f"{self.name} is an array ({self.type}[{self.array_len}]); "
                               f"read it with probe_read_kernel from ctx+{self.offset}")
        if self.size not in (1, 2, 4, 8):
            raise ProgramError(f"{self.name} is {self.size} bytes; only 1/2/4/8 load directly")
        if ctx is None:
            from ..program import R1
            ctx = R1
        return program.load(dst, ctx, self.offset, self.size,
                            signed=self.signed and self.size < 8)


@record
class TracepointFormat(Record):
    """The parsed ``events/<category>/<event>/format`` file."""

    category: str
    name: str
    id: int
    fields: tuple[TracepointField, ...]
    print_fmt: str = ""

    @property
    def size(self) -> int:
        """Bytes up to the end of the last field."""
        return max((f.offset + f.size for f in self.fields), default=0)

    def field(self, name: str) -> TracepointField:
        """The field called ``name`` (also ``fmt[name]``); KeyError lists the fields."""
        for f in self.fields:
            if f.name == name:
                return f
        names = [f.name for f in self.fields]
        close = close_matches(name, names, n=4, cutoff=0.5)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise UnknownNameError(f"{self.category}:{self.name} has no field {name!r}; fields: "
                               f"{', '.join(names)}{hint}")

    def __getitem__(self, name: str) -> TracepointField:  # type: ignore[override]
        return self.field(name)     # (a name, not a tuple index)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.fields)


_FIELD = (r"field:(?P<decl>[^;]*);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
          r"(?:\s*signed:(?P<signed>-?\d+);)?")
_DECL = r"^(?P<type>.*?)\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<len>[^\]]*)\])?\s*$"


def parse_tracepoint_format(text: str, category: str = "", name: str = "") -> TracepointFormat:
    """Parse the text of a tracepoint ``format`` file."""
    import re                        # (not at module level: it costs start-up ~5 ms)
    field_re, decl_re = re.compile(_FIELD), re.compile(_DECL)
    tp_id = 0
    fields: list[TracepointField] = []
    print_fmt = ""
    common = True
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("name:") and not name:
            name = s.split(":", 1)[1].strip()
        elif s.startswith("ID:"):
            tp_id = int(s.split(":", 1)[1])
        elif s.startswith("print fmt:"):
            print_fmt = s.split(":", 1)[1].strip()
        elif not s and fields:
            common = False
        else:
            m = field_re.search(s)
            if not m:
                continue
            decl = m.group("decl").strip()
            data_loc = decl.startswith("__data_loc")
            if data_loc:
                decl = decl[len("__data_loc"):].strip()
            dm = decl_re.match(decl)
            if not dm:
                continue
            ftype = dm.group("type").strip()
            alen = dm.group("len")
            array_len = None
            if alen is not None and not data_loc:
                try:
                    array_len = int(alen, 0)
                except ValueError:
                    array_len = 0
            if data_loc and ftype.endswith("[]"):
                ftype = ftype[:-2].strip()
            fields.append(TracepointField(
                dm.group("name"), ftype, int(m.group("off")), int(m.group("size")),
                m.group("signed") == "1", array_len, data_loc, common))
    return TracepointFormat(category, name, tp_id, tuple(fields), print_fmt)


def tracepoint_format(name: str) -> TracepointFormat:
    """Field names, offsets, sizes and signedness of tracepoint ``"category:event"``."""
    cat, event, d = _tp_dir(name)
    with open(os.path.join(d, "format")) as f:
        return parse_tracepoint_format(f.read(), cat, event)


def attach_tracepoint(prog: AttachableProgram, name: str, *, method: str = "auto") -> Link:
    """Attach a TRACEPOINT program to ``"category:event"`` (e.g.
    ``"syscalls:sys_enter_openat"``), on every CPU and process.

    ``prog`` is loaded as ``"tracepoint"`` or is a source to load.  The
    program's context is the record described by :func:`tracepoint_format`.
    A wrong name raises :class:`AttachError` listing close matches.
    """
    tp_id = tracepoint_id(name)
    cat, event = _split_tp(name)
    return attach_one_event(prog, ProgType.TRACEPOINT, "tracepoint", f"{cat}:{event}", method,
                            lambda: perf.tracepoint_attr(tp_id).open(pid=-1, cpu=0))


# ============================================================ raw tracepoints
def list_raw_tracepoints() -> list[str]:
    """Names accepted by :func:`attach_raw_tracepoint` (from ``/proc/kallsyms``'
    ``__traceiter_*`` symbols; empty when kallsyms is unreadable)."""
    names = set()
    try:
        with open("/proc/kallsyms") as f:
            for line in f:
                i = line.find(" __traceiter_")
                if i >= 0:
                    names.add(line[i + len(" __traceiter_"):].split()[0])
    except OSError:
        pass
    return sorted(names)


def attach_raw_tracepoint(prog: AttachableProgram, name: str) -> Link:
    """Attach a RAW_TRACEPOINT program to kernel tracepoint ``name`` (``"sys_enter"``,
    ``"sched_switch"``); no tracefs needed.  The context is ``u64 args[]``, the
    tracepoint's raw arguments."""
    t0 = time.perf_counter()
    loaded, owned = prepare(prog, ProgType.RAW_TRACEPOINT, "attach_raw_tracepoint")
    try:
        fd = _sys.raw_tracepoint_open(name, prog_fd(loaded))
    except KernelError as exc:
        if owned is not None:
            owned.close()
        if exc.errno == E.ENOENT:
            known = list_raw_tracepoints()
            close = close_matches(name, known, n=5, cutoff=0.6)
            raise AttachError(E.ENOENT, "attach_raw_tracepoint",
                              f"no raw tracepoint {name!r} ({len(known)} exist)",
                              ("close matches: " + ", ".join(close)) if close else
                              "the name is a tracepoint name without category, e.g. "
                              "'sys_enter' or 'sched_switch'") from exc
        raise
    return Link("raw_tracepoint", name, "raw_tracepoint", [[fd]], program=loaded,
                owns_program=owned is not None, attach_seconds=time.perf_counter() - t0)
