"""Running a compiled bpftrace program: create the maps, load and attach
the programs, run BEGIN, read the events in the order they were sent, run
END, read the maps -- and print all of it as bpftrace 0.17 does.

Order of a run (:meth:`BtRun.start`): maps and the ring buffer are created,
every program is loaded (a verifier rejection points at the script's
line), BEGIN runs (``BPF_PROG_TEST_RUN`` of its raw-tracepoint program, in
this process: its ``pid``/``comm`` are the tracer's, as bpftrace's are), so
that its events come before any probe's, then the probes are attached --
in bpftrace's order, so that probes of one event fire in the order they are
declared -- and only then is the ``-c`` command released.
:meth:`BtRun.stop` detaches the probes, runs END, drains the events left
and keeps the maps readable until :meth:`BtRun.close`.

Events become :class:`BtEvent` records; the actions user space performs
(``print``, ``clear``, ``zero``, ``exit``) happen when their event is read,
in order, as in bpftrace.
"""
from __future__ import annotations

from .._record import Record, record
from ..kernel.lifetime import Owner
from . import layout
from .types import Type, int_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

    from .codegen import Action, MapPlan, Unit

__all__ = ["BtEvent", "BtRun", "map_entries"]


@record
class BtEvent(Record):
    """One event of a running program: ``kind`` (``printf``, ``print``,
    ``time``, ``exit``, ``clear``, ``zero``, ``cat``, ``system``), its
    ``values`` (Python values of the arguments), the ``text`` bpftrace would
    print for it (``""`` for silent ones), ``fmt`` (printf's and time's
    format) and ``error``: what bpftrace prints on stderr for it (``cat``
    of a file it cannot read), else ``""``."""

    kind: str
    values: tuple[Any, ...]
    text: str
    fmt: str = ""
    map: str | None = None
    error: str = ""

    def __repr__(self) -> str:
        return f"BtEvent({self.kind!r}, {self.values!r}, {self.text!r})"


def _bound_agg(plan: MapPlan, live: Any) -> Any:
    """A copy of ``plan``'s aggregation reading the live map ``live``."""
    agg = object.__new__(type(plan.agg))
    agg.__dict__.update(plan.agg.__dict__)
    agg.map = live
    return agg


def map_entries(plan: MapPlan, live: Any, probe_names: list[str]) -> dict[Any, Any]:
    """The entries of a live map as Python values: key (``None`` without
    one; a tuple for several keys) -> value (int; str; ``(count, total)``
    for avg/stats; ``{bucket: count}`` for hist/lhist)."""
    def key_of(raw: bytes | int) -> Any:
        if plan.key is None:
            return None
        if isinstance(raw, int):          # (8-byte keys come back as u64)
            raw = raw.to_bytes(8, "little")
        return _value(plan.key, layout.decode(plan.key, raw, whole=True), probe_names)
    out: dict[Any, Any] = {}
    if plan.kind == "plain":
        vt = plan.value if plan.value.kind != "int" else int_type(8, plan.value.signed)
        for k, v in live.items():
            out[key_of(k)] = _value(vt, layout.decode(vt, v), probe_names)
        return out
    from . import aggregations as agg
    bound = _bound_agg(plan, live)
    if plan.kind in ("avg", "stats"):
        data = agg.Stats.read(bound)
        assert isinstance(data, dict)
        for k, (count, _avg, total) in data.items():
            out[key_of(k)] = (count, total)
        return out
    data = bound.read()
    assert isinstance(data, dict)
    if plan.kind in ("hist", "lhist") and plan.key is None:
        return {None: data} if data else {}       # (a per-CPU array of buckets)
    unsigned_sum = plan.kind == "sum" and not plan.value.signed
    for k, v in data.items():
        # a sum of unsigned values prints unsigned (bpftrace: sum(arg0) of -3
        # is 18446744073709551613); min and max compare and print signed
        out[key_of(k)] = v & 0xFFFFFFFFFFFFFFFF if unsigned_sum and isinstance(v, int) else v
    return out


def _value(t: Type, v: Any, probe_names: list[str]) -> Any:
    """Python value -> what the printing takes (probe index -> its name)."""
    if t.kind == "probe" and isinstance(v, int):
        return probe_names[v] if 0 <= v < len(probe_names) else str(v)
    if t.kind == "inet" and isinstance(v, int):          # ntop(IPv4 as an integer)
        return (v & 0xFFFFFFFF).to_bytes(4, "little")
    if t.kind == "tuple" and isinstance(v, tuple):
        return tuple(_value(e, x, probe_names) for e, x in zip(t.elems, v))
    return v


class BtRun(Owner):
    """A started program (see the module docs); a context manager (leaving
    it stops, then closes the run).

    Iterating gives its printf (and other) events as :class:`BtEvent`, as
    they come, until the program exits (``exit()``), :meth:`stop` is
    called, or the ``-c`` command ends."""

    def __init__(self, unit: Unit, *, pid: int | None = None, child: Any = None,
                 json_mode: bool = False) -> None:
        self._own()               # the maps, programs, links and reader close themselves
        self.unit = unit
        self.pid = pid
        self.child = child
        self.json_mode = json_mode
        self.live: dict[str, Any] = {}
        self.loaded: list[Any] = []
        self.links: list[Any] = []
        self.reader: Any = None
        self.exited = False
        self.stopped = False
        self._end_done = False
        #: the child was started by this run (killed and closed with it)
        self.owns_child = False
        #: names the stacks (when the program takes any)
        self.stacks: Any = None
        #: names user addresses (usym, func), made on first use
        self._usyms: Any = None
        #: watched address -> the watchpoints placed on it (unwatch() removes them)
        self._watches: dict[int, list[Any]] = {}
        #: False: -k's warnings are not printed in text (bpftrace's --no-warnings;
        #: JSON keeps its helper_error records)
        self.show_warnings = True
        #: the keys of each hist/lhist map that zero() kept (their buckets all
        #: zero: the map holds nothing for them, bpftrace prints them empty)
        self._zeroed: dict[str, set[Any]] = {}

    # ---------------------------------------------------------- lifetime
    def start(self, release: bool = True, begun: Callable[[BtRun], None] | None = None
              ) -> BtRun:
        """Create, load, run BEGIN, attach, release the command (unless
        ``release`` is False: the caller does). ``begun(run)``, when given,
        is called once BEGIN has run and before the probes are attached: a
        caller printing BEGIN's events there shows them without waiting for
        the attaching (the kernel's wait at the first uprobe, ~15 ms)."""
        try:
            self._create()
            self._load()
            self._run_special("BEGIN")
            if begun is not None:
                begun(self)
            self._attach()
            if self.child is not None and release:
                self.child.go()
                self.child_started()
        except BaseException:
            self.close()
            raise
        return self

    def child_started(self) -> None:
        """Call once the ``-c`` command has exec'd (``start(release=False)``
        callers, after ``child.go()``): its modules are read then, so that
        events name its symbols even if it exits before they are read."""
        python = getattr(self.stacks, "python", None)
        if python is not None and self.child is not None and not self.pid:
            python.configure(self.child.pid, wait=1.0)     # (pystack: its layout now)
        if self._events_print_usym():
            self._user_symbols().snapshot()

    def _create(self) -> None:
        from ..events import RingBufferReader
        for name, spec in self.unit.all_map_specs().items():
            self.live[name] = spec.create()
        drops = self.live[self.unit.drops.name] if self.unit.drops is not None else None
        self.reader = RingBufferReader(self.live[self.unit.ringbuf.name], drops=drops)
        u = self.unit
        if u.stack_map is not None or u.kstack_map is not None or u.pystacks:
            from .stacks import StackPrinter
            files = [getattr(pl.source, "path", None) for pl in u.probes]
            self.stacks = StackPrinter(self.live.get("bt_ustacks"), self.live.get("bt_kstacks"),
                                       [f for f in files if f])
            if self.pid:
                self.stacks.remember_pid(self.pid)
            if self.child is not None:
                self._add_command_file(self.child)
            if u.pystacks:
                from .pystack import PyStackNames
                self.stacks.python = PyStackNames(self.live)
                if self.pid:
                    self.stacks.python.configure(self.pid)
                elif self.child is None:
                    self.stacks.python.configure_binaries([f for f in files if f])

    def _add_command_file(self, child: Any) -> None:
        """Search the ``-c`` command's executable (and its libraries) for the
        build ids of its stacks: it may be probed only through a library,
        and may have exited before its stacks are printed."""
        import os
        import shutil
        argv = getattr(child, "argv", None)
        path = shutil.which(argv[0]) if argv else None
        if path:
            self.stacks.symbolizer.add_file(os.path.realpath(path))

    def _load(self) -> None:
        from .. import loader
        from ..errors import VerifierError
        for plan in self.unit.probes:
            ptype, opts = plan.load_args()
            try:
                self.loaded.append(loader.load(plan.program, ptype, maps=self.live,
                                               name=plan.program.name,
                                               expected_attach_type=opts.get(
                                                   "expected_attach_type", 0)))
            except VerifierError as exc:
                raise _script_error(self.unit, exc, plan.name) from exc

    def _attach(self) -> None:
        """Attach every probe: first, in script order, those whose kind the
        kernel runs in the order they were attached; then, in reverse, those
        it runs last-attached first (uprobes, USDT, software events) -- as
        bpftrace 0.17 does, so that the probes of one event fire in the
        order they are declared."""
        pairs = [(plan, loaded) for plan, loaded in zip(self.unit.probes, self.loaded)
                 if plan.source is not None and getattr(plan.source, "setup", None) is None]
        first = [pair for pair in pairs if not _attached_in_reverse(pair[0].source)]
        late = [pair for pair in pairs if _attached_in_reverse(pair[0].source)]
        for plan, loaded in first + late[::-1]:
            pid = self._watched_pid() if _is_watchpoint(plan.source) else self.pid
            self.links.append(plan.source.attach(loaded, pid))

    def _watched_pid(self) -> int | None:
        """The process watchpoints watch: ``-p``'s, else the ``-c`` command's."""
        return self.pid if self.pid is not None else getattr(self.child, "pid", None) or None

    def attached_count(self) -> int:
        """How many probes bpftrace's ``Attaching N probes...`` counts: one
        per program, BEGIN and END included, a USDT probe once per location."""
        return sum(len(getattr(getattr(plan.source, "usdt", None), "locations", None) or (1,))
                   for plan in self.unit.probes
                   if getattr(plan.source, "setup", None) is None)   # (placed later)

    def _place_watchpoint(self, watch: int, address: int) -> BtEvent | None:
        """The setup probe of ``unit.probes[watch]`` sent ``address``: watch it
        (once per address and probe), then let the stopped process go on; an
        event saying so when the CPU has no debug register left."""
        import os
        import signal

        from ..errors import KernelError
        from .watchpoints import OUT_OF_REGISTERS
        plan = self.unit.probes[watch]
        source = plan.source
        pid = self._watched_pid()
        out = None
        if source.placed != address:
            source.placed = address
            try:
                link = source.attach_at(self.loaded[watch], address, pid)
                self.links.append(link)
                self._watches.setdefault(address, []).append(link)
            except KernelError as exc:
                if exc.errno == 3:             # ESRCH: the process is gone already
                    return None
                if exc.errno != 28:            # ENOSPC: every debug register taken
                    raise
                out = BtEvent("printf", (), OUT_OF_REGISTERS + "\n")
        if not source.asynchronous and pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        return out

    def _release_watched(self) -> None:
        """A setup probe may have stopped the process for a watchpoint whose
        event came after exit(): let it go on (SIGCONT)."""
        pid = self._watched_pid()
        if pid is not None and any(plan.kind == "watch_setup" and
                                   not self.unit.probes[i - 1].source.asynchronous
                                   for i, plan in enumerate(self.unit.probes)):
            import os
            import signal
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def _unwatch(self, address: int) -> None:
        """Remove every watchpoint on ``address`` (none: nothing)."""
        for link in self._watches.pop(address, []):
            if link in self.links:
                self.links.remove(link)
            link.close()

    def _run_special(self, kind: str) -> None:
        for plan, loaded in zip(self.unit.probes, self.loaded):
            if plan.kind == kind:
                loaded.test_run()

    def stop(self, discard: bool = False) -> None:
        """Detach the probes and run END (once); the maps stay readable.
        ``discard``: the events not yet read are dropped, not performed (a
        stop signal: bpftrace stops reading them, so a backlog of
        ``system()`` commands is not run); END's are read as usual."""
        if self.stopped:
            return
        self.stopped = True
        self._detach()
        self._release_watched()
        if not self._end_done and self.loaded:
            self._end_done = True
            if (self.exited or discard) and self.reader is not None:
                self.reader.read_batch(timeout=0)     # what came after exit() is dropped
            self.exited = False                       # END's own events are read
            self._run_special("END")

    def _detach(self) -> None:
        links, self.links = self.links, []
        for link in links:
            try:
                link.close()
            except OSError:
                pass

    def _close_resources(self) -> None:
        """Detach and close every kernel object (and the ``-c`` command it started)."""
        self._detach()
        if self.reader is not None:
            self.reader.close()
        for p in self.loaded:
            p.close()
        for m in self.live.values():
            m.close()
        self.loaded, self.live = [], {}
        child = self.child
        if self.owns_child and child is not None:
            if child.status is None and not child.poll():
                child.kill()
            child.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()

    # ---------------------------------------------------------- events
    def poll(self, timeout: float | None = 0.0) -> list[BtEvent]:
        """The events that arrived (waiting up to ``timeout`` seconds for
        the first), their actions performed; after an ``exit()`` event,
        nothing more."""
        if self.exited or self.reader is None:
            return []
        raws = self.reader.read_batch(timeout=timeout)
        out: list[BtEvent] = []
        for raw in raws:
            ev = self._event(bytes(raw))
            if ev is None:
                continue
            out.append(ev)
            if ev.kind == "exit":
                self.exited = True
                break
        return out

    def __iter__(self) -> Iterator[BtEvent]:
        while not self.exited:
            if self.child is not None and self.child.poll():
                yield from self.poll(0)
                return
            if self.stopped:
                yield from self.poll(0)
                return
            yield from self.poll(0.1)

    def _event(self, raw: bytes) -> BtEvent | None:
        ident = int.from_bytes(raw[:8], "little")
        actions = self.unit.actions
        if ident >= len(actions):
            return None
        a = actions[ident]
        values: tuple[Any, ...] = ()
        if a.record is not None:
            decoded = layout.decode(a.record, raw[8:])
            assert isinstance(decoded, tuple)
            values = tuple(_value(t, v, self.unit.probe_names) for t, v in zip(a.args, decoded))
            if a.strftime:
                values = tuple((a.strftime[i], v) if i in a.strftime else v
                               for i, v in enumerate(values))
        return self._perform(a, values)

    def _perform(self, a: Action, values: tuple[Any, ...]) -> BtEvent:
        from . import output
        kind = a.kind
        if kind == "printf":
            text = output.format_printf(a.fmt, list(zip(self._printed_types(a), values)),
                                        stacks=self._stack_fmt(8), syms=self._event_sym_text)
            if self.json_mode:
                text = output.json_printf(text) + "\n"
            return BtEvent("printf", values, text, a.fmt)
        if kind in ("cat", "system"):
            text = output.format_printf(a.fmt, list(zip(self._printed_types(a), values)),
                                        stacks=self._stack_fmt(8), syms=self._event_sym_text)
            text, error = _cat(text) if kind == "cat" else _system(text)
            if self.json_mode:      # (bpftrace 0.17 names system()'s output "syscall")
                text = output.json_printf(text, "cat" if kind == "cat" else "syscall") + "\n"
            return BtEvent(kind, values, text, a.fmt, error=error)
        if kind == "time":
            text = output.format_time(a.fmt)
            if self.json_mode:
                text = output.json_time(text) + "\n"
            return BtEvent("time", (), text, a.fmt)
        if kind == "print_value":
            t = self._printed_types(a)[0]
            if self.json_mode:
                text = output.json_value(t, values[0], stacks=self._stack_fmt(4),
                                         syms=self._event_sym_text) + "\n"
            else:
                text = output.format_value(t, values[0], stacks=self._stack_fmt(4),
                                           syms=self._event_sym_text) + "\n"
            return BtEvent("print", values, text)
        if kind == "exit":
            return BtEvent("exit", (), "")
        if kind == "watch":
            placed = self._place_watchpoint(int(values[0]), int(values[1]))
            return placed or BtEvent("watch", values, "")
        if kind == "unwatch":
            self._unwatch(int(values[0]))
            return BtEvent("unwatch", values, "")
        if kind == "helper_error":
            return BtEvent("helper_error", values, self._helper_error(a, values[0]), a.fmt)
        if kind == "join":
            parts = []
            for v in values:
                if not v:
                    break
                parts.append(v)
            joined = a.fmt.join(parts)
            text = output.json_join(joined) if self.json_mode else joined
            text += "\n"
            return BtEvent("join", tuple(parts), text, a.fmt)
        assert a.map is not None
        if kind == "print":
            top, div = (a.params + [0, 0])[:2]
            return BtEvent("print", (), self.format_map(a.map, top=top, div=div or 1), map=a.map)
        if kind == "clear":
            self.clear_map(a.map)
        elif kind == "zero":
            self.zero_map(a.map)
        return BtEvent(kind, (), "", map=a.map)

    def _helper_error(self, a: Action, retcode: int) -> str:
        """bpftrace's -k report of a failed helper: a warning pointing at the
        script (text), or a ``helper_error`` record (JSON)."""
        from . import output
        if self.json_mode:
            return output.json_helper_error(a.fmt, retcode, a.pos.line, a.pos.column) + "\n"
        if not self.show_warnings:
            return ""
        import os

        from .positions import script_error
        why = f"{os.strerror(-retcode)} ({retcode})" if retcode < 0 else str(retcode)
        text = str(script_error(self.unit.script, a.pos, f"Failed to {a.fmt}: {why}"))
        # (a positioned error's text, as a warning)
        return text.replace(": ERROR: ", ": WARNING: ", 1) + "\n"

    def _user_symbols(self) -> Any:
        """The :class:`~pyebpf.lang.stacks.UserSymbols` of this run."""
        if self._usyms is None:
            from .stacks import UserSymbols
            self._usyms = UserSymbols([self.pid or 0, getattr(self.child, "pid", 0) or 0])
        return self._usyms

    def _sym_text(self, addr: int, t: Type, event: bool = False) -> str:
        """``usym``/``ksym``/``func`` as bpftrace prints them: the symbol's
        name, or the address in hex when it has none (in a map, a user
        address once its process is gone, as in bpftrace)."""
        if t.kind == "ksym":
            from .stacks import kernel_symbol_name
            name = kernel_symbol_name(addr) if addr else None
        else:      # named in the process stored with it (bpftrace 0.17), else -p/-c's
            pid = getattr(addr, "pid", 0)
            name = self._user_symbols().name(addr, event, pid) if addr else None
        if name is None:
            return "0" if addr == 0 and t.kind == "usym" else f"0x{addr & 0xFFFFFFFFFFFFFFFF:x}"
        return name

    def _event_sym_text(self, addr: int, t: Type) -> str:
        return self._sym_text(addr, t, event=True)

    def _events_print_usym(self) -> bool:
        """Some printf/print event prints a user symbol (usym, func)."""
        return any(t.kind == "usym" for a in self.unit.actions
                   if a.kind in ("printf", "print_value") for t in a.args)

    def _stack_fmt(self, indent: int) -> Any:
        return self.stacks.formatter(indent) if self.stacks is not None else None

    def _printed_types(self, a: Action) -> list[Type]:
        return [Type("string", 64) if t.kind == "probe" else t for t in a.args]

    # ---------------------------------------------------------- maps
    def _live_map(self, name: str) -> tuple[MapPlan, Any]:
        plan = self.unit.maps[name]
        return plan, self.live[plan.kname]

    def entries(self, name: str) -> dict[Any, Any]:
        """The entries of map ``name`` (``"@x"``; see :func:`map_entries`)."""
        plan, live = self._live_map(name)
        got = map_entries(plan, live, self.unit.probe_names)
        for key in self._zeroed.get(name, ()):
            got.setdefault(key, {})
        return got

    def maps(self) -> dict[str, Any]:
        """Every map as Python data: ``{"@x": value}`` for a map without
        key, ``{"@x": {key: value}}`` otherwise (tuple keys for several
        keys); avg as an int, stats as ``(count, average, total)``,
        histograms as ``{(lo, hi): count}`` (None for an open end)."""
        from ..draw.buckets import log2_bucket_range
        from .output_maps import lhist_range
        out: dict[str, Any] = {}
        for name, plan in sorted(self.unit.maps.items()):
            entries = self.entries(name)
            conv: dict[Any, Any] = {}
            for k, v in entries.items():
                if plan.kind in ("avg", "stats"):
                    count, total = v
                    avg = abs(total) // count * (1 if total >= 0 else -1) if count else 0
                    v = avg if plan.kind == "avg" else (count, avg, total)
                elif plan.kind in ("hist", "lhist"):
                    lin = plan.value.lhist
                    v = {(log2_bucket_range(b) if lin is None
                          else lhist_range(b, *lin)): c for b, c in sorted(v.items())}
                conv[k] = v
            out[name] = conv.get(None) if plan.key is None else conv
            if plan.key is None and None not in conv:
                del out[name]
        return out

    def format_map(self, name: str, *, top: int = 0, div: int = 1) -> str:
        """Map ``name`` as bpftrace prints it (``-f json``: its JSON line)."""
        from . import output_maps as output
        plan, _ = self._live_map(name)
        entries = self.entries(name)
        if getattr(self.stacks, "python", None) is not None:
            from .pystack import merge_printed
            entries = merge_printed(plan, entries, self.stacks.python)
        key = _printed(plan.key)
        if self.json_mode:
            line = output.json_map(name, key, plan.value, entries, top=top, div=div,
                                   stacks=self._stack_fmt(4), syms=self._sym_text)
            return line + "\n" if line else ""
        return output.format_map(name, key, plan.value, entries, top=top, div=div,
                                 stacks=self._stack_fmt(4), syms=self._sym_text)

    def format_exit(self) -> str:
        """What bpftrace prints at exit: two newlines (in JSON mode too),
        then every map, by name (:meth:`format_maps`)."""
        return "\n\n" + self.format_maps()

    def format_maps(self) -> str:
        """Every map, by name, as bpftrace prints them (on SIGUSR1: the run
        goes on)."""
        return "".join(self.format_map(n) for n in sorted(self.unit.maps))

    def clear_map(self, name: str) -> None:
        """Delete every entry of map ``name``."""
        self._zeroed.pop(name, None)
        plan, live = self._live_map(name)
        if plan.agg is not None and not plan.agg.keyed:
            _bound_agg(plan, live).clear()        # (an array: its slots zeroed)
            return
        for k in list(live.keys()):
            try:
                del live[k]
            except KeyError:
                pass

    def zero_map(self, name: str) -> None:
        """Set every value of map ``name`` to zero, keeping the keys."""
        plan, live = self._live_map(name)
        if plan.kind in ("hist", "lhist"):
            # (bpftrace zeroes the buckets and keeps the keys; here the buckets
            # go, and the keys are remembered: printed with no bucket)
            keys = set(self.entries(name))
            self.clear_map(name)
            self._zeroed[name] = keys
            return
        for k in list(live.keys()):
            try:
                if plan.kind == "plain":
                    live[k] = bytes(plan.value_size)
                else:
                    cur = live[k]
                    zero = tuple(0 for _ in cur[0]) if isinstance(cur[0], tuple) else 0
                    live[k] = [zero] * len(cur)
            except KeyError:
                pass


def _is_watchpoint(source: Any) -> bool:
    return getattr(source, "kind", None) in ("watchpoint", "asyncwatchpoint")


def _attached_in_reverse(source: Any) -> bool:
    """The kernel runs the programs of this kind of probe last-attached
    first: uprobes and USDT (a uprobe's consumers are a list pushed at its
    head) and software perf events."""
    return getattr(source, "kind", None) in ("uprobe", "uretprobe", "software") or \
        hasattr(source, "usdt")


def _cat(path: str) -> tuple[str, str]:
    """cat(): the file's text (``BPFTRACE_CAT_BYTES_MAX`` bytes at most,
    10240 by default, as bpftrace 0.17), or an error as bpftrace words it."""
    import os
    try:
        limit = int(os.environ.get("BPFTRACE_CAT_BYTES_MAX", "10240"))
    except ValueError:
        limit = 10240
    try:
        with open(path, "rb") as f:
            data = f.read(max(limit, 0))
    except OSError as exc:
        return "", f"ERROR: failed to open file '{path}': {exc.strerror}\n"
    return data.decode("utf-8", "surrogateescape"), ""


def _system(command: str) -> tuple[str, str]:
    """system(): the shell command's standard output (its standard error
    goes where this process's goes), as bpftrace 0.17 runs it."""
    import subprocess
    try:
        done = subprocess.run(command, shell=True, stdout=subprocess.PIPE, check=False)
    except OSError as exc:
        return "", f"ERROR: system() failed: {exc.strerror}\n"
    return done.stdout.decode("utf-8", "surrogateescape"), ""


def _printed(t: Type | None) -> Type | None:
    """A key type as the printing sees it (probe indexes are names)."""
    if t is None:
        return None
    if t.kind == "probe":
        return Type("string", 64)
    if t.kind == "tuple":
        return Type("tuple", elems=tuple(_printed(e) or e for e in t.elems))
    return t


def _script_error(unit: Unit, exc: Any, probe: str) -> Exception:
    """A verifier rejection, pointing at the script line it comes from."""
    from .positions import script_error
    return script_error(unit.script, exc.origin, f"the kernel's verifier rejected the program "
                        f"of {probe}: {_verifier_reason(exc)}", exc)


_NOT_A_REASON = ("processed ", "old state", "cur state", "verification time", "stack depth",
                 "mark_precise", "last_idx", "regs=", "parent ", "from ", "R0", "R1", "R6",
                 ";", "func#", "Live regs", "Global function")


def _verifier_reason(exc: Any) -> str:
    """The line of the verifier's log that says why (not a state dump)."""
    for line in reversed((exc.log or "").splitlines()):
        text = line.strip()
        if not text or text.startswith(_NOT_A_REASON) or text.split(":", 1)[0].isdigit():
            continue
        return text
    return str(exc.message or exc.summary)
