"""The Python API of the bpftrace language: compile a program, start it,
read its events and maps -- no subprocess::

    from pyebpf import lang
    prog = lang.compile('uprobe:/bin/bash:readline { @n[comm] = count(); }')
    print(prog.show())                 # the generated eBPF, per probe
    with prog.start() as run:          # attached; BEGIN has run
        for event in run:              # printf events as BtEvent records
            ...
        run.stop()                     # detach, run END
        print(run.maps())              # {"@n": {"bash": 3}}

:func:`compile` parses and analyses the script and resolves its probes
(so a bad program or a missing probe fails here); the eBPF is generated
by :meth:`BtProgram.start` (which knows the ``-c`` command's pid, the
``cpid`` builtin) and by :meth:`BtProgram.show`.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from .ast import AttachPoint, Script
    from .codegen import Unit
    from .includes import Header
    from .runtime import BtRun

__all__ = ["compile", "BtProgram", "resolver_for"]


def compile(text: str, *, filename: str = "stdin", pid: int | None = None,
            params: Sequence[str] = (), unsafe: bool = False,
            command: Sequence[str] | None = None, includes: Sequence[str] = (),
            include_dirs: Sequence[str] = (), helper_check: int = 0) -> BtProgram:
    """Parse, analyse and resolve the bpftrace program ``text``.

    ``pid`` restricts uprobes/USDT to that process (``-p``); ``params`` are
    the positional parameters ``$1``...; ``unsafe`` (bpftrace's ``--unsafe``):
    uprobes may go where no instruction start is proven, and ``system()``
    runs its commands; ``command``: the argv that :meth:`BtProgram.start`
    will run (a watchpoint on a function's argument watches that program);
    ``includes``: headers included before the program (``--include``),
    searched with the program's ``#include`` ones in ``include_dirs``
    (``-I``) then the system's; ``helper_check``: bpftrace's ``-k`` (1) or
    ``-kk`` (2), failed helpers reported as ``helper_error`` events. Raises
    :class:`~pyebpf.lang.errors.LangError` (pointing at the script) for an
    invalid program or a header not found, and the probe layer's errors
    for missing probes."""
    from .parser import parse
    script = parse(text, filename, params, includes, include_dirs)
    headers: list[Header] = []
    if includes or "#" in text:      # (the module only when there may be any)
        from .includes import find_headers
        headers = find_headers(text, filename, includes, include_dirs)
    prog = BtProgram(script, pid=pid, params=params, unsafe=unsafe, command=command,
                     headers=headers)
    prog.helper_check = helper_check
    return prog


class BtProgram:
    """A compiled program (see the module docs)."""

    def __init__(self, script: Script, *, pid: int | None = None,
                 params: Sequence[str] = (), unsafe: bool = False,
                 command: Sequence[str] | None = None,
                 headers: Sequence[Header] = ()) -> None:
        self.script = script
        self.pid = pid
        #: the C headers included (``--include`` ones first, then ``#include``
        #: lines), found: :class:`~pyebpf.lang.includes.Header` records
        self.headers = list(headers)
        #: bpftrace's -k level (see :func:`compile`)
        self.helper_check = 0
        self.params = list(params)
        self.unsafe = unsafe
        self._resolved: dict[int, list[tuple[str, Any]]] = {}
        self.resolver = resolver_for(pid, unsafe, command)
        #: what does not stop the program, as bpftrace warns of it (its text)
        self.warnings: list[str] = []
        try:
            self.analysis = _analyse(script, self.resolver, self.params, unsafe)
        except RecursionError as exc:
            from .positions import too_deep
            raise too_deep(script, exc) from None
        for probe in script.probes:          # resolve now: a missing probe fails here
            for ap in probe.attach_points:
                if ap.provider not in ("BEGIN", "END"):
                    self._resolve_or_skip(ap, len(probe.attach_points) > 1)
        from .pystack import check_targets   # (pystack: a CPython to read, or a clear error)
        self._files = [p for got in self._resolved.values() for _, src in got
                       if (p := getattr(src, "path", None))]
        #: pystack's process is known only once start() is given a command
        self._pystack_later = check_targets(script, pid, command, self._files,
                                            later=pid is None and not command)

    def _resolve_or_skip(self, ap: AttachPoint, shared: bool) -> None:
        """Resolve ``ap``; a missing tracepoint that shares its probe with
        other attach points is left out with a warning, as bpftrace 0.17
        does (alone, it is an error); a probe that does not exist is
        reported at ``ap`` (bpftrace's message, the line and a caret;
        pyebpf's hint after)."""
        from .probes import ProbeNotFoundError, ProbeSpecError, missing_tracepoint
        try:
            self._resolve(ap)
        except ProbeSpecError as exc:
            name = missing_tracepoint(ap) if shared else None
            if name is None:
                if isinstance(exc, ProbeNotFoundError):
                    from .positions import script_error
                    err = script_error(self.script, ap.pos, exc.message, exc)
                    if exc.hint:
                        err.args = (f"{err}\n{exc.hint}",)
                    raise err from exc
                raise
            from .errors import Diagnostic
            ap.missing = f"tracepoint not found: {name}"
            self._resolved[id(ap)] = []
            self.warnings.append(str(Diagnostic(ap.missing, ap.pos, level="WARNING",
                                                filename=self.script.filename,
                                                source=self.script.source)))

    def _resolve(self, ap: AttachPoint) -> list[tuple[str, Any]]:
        got = self._resolved.get(id(ap))
        if got is None:          # (the semantic pass's resolver may have them: once)
            got = self._resolved[id(ap)] = [(r.name, r.source)
                                            for r in self.resolver.probes(ap)]
        return got

    def check_pystack(self, command: Sequence[str] | None = None) -> None:
        """Refuse (a script error at it) a ``pystack`` that has no CPython to
        read, when compiling named no process and ``command`` (the argv
        about to run, or None) names none either."""
        if self._pystack_later:
            from .pystack import check_targets
            check_targets(self.script, None, command, self._files)

    def generate(self, cpid: int | None = None, *, count_drops: bool = False) -> Unit:
        """The generated programs and maps (pure: nothing is created);
        ``count_drops``: the events the ring buffer refuses are counted (the
        reader reports them as lost)."""
        import time

        from .codegen import CodegenError, generate
        try:
            return generate(self.script, self.analysis, resolve=self._resolve, cpid=cpid,
                            params=self.params, start_ns=time.monotonic_ns(),
                            count_drops=count_drops, helper_check=self.helper_check)
        except RecursionError as exc:
            from .positions import too_deep
            raise too_deep(self.script, exc) from None
        except CodegenError as exc:
            if exc.pos is None:
                raise
            from .positions import script_error   # pointed at the script, as bpftrace does
            raise script_error(self.script, exc.pos, str(exc), exc) from exc

    def show(self) -> str:
        """The ``--show-program`` text: per probe, the generated eBPF (llvm
        dialect) with the script lines it comes from, and the maps."""
        from .show import show_unit
        return show_unit(self.generate())

    def start(self, command: Sequence[str] | None = None, *, json: bool = False,
              child: Any = None, release: bool = True,
              begun: Callable[[BtRun], None] | None = None) -> BtRun:
        """Load and attach, run BEGIN, then start ``command`` (argv) if
        given: its pid is ``cpid``. Returns the running :class:`BtRun`.

        ``child``: a :class:`pyebpf.session.live.Child` already spawned (held)
        instead of ``command``; ``release=False`` leaves it held (the
        caller calls its ``go()``); ``begun(run)`` is called once BEGIN has
        run, before the probes are attached (:meth:`BtRun.start`)."""
        from .runtime import BtRun
        self.check_pystack(command if command is not None else getattr(child, "argv", None))
        own = False
        if command is not None and child is None:
            from ..session.live import Child
            child = Child(list(command))
            own = True
        try:
            unit = self.generate(child.pid if child is not None else None)
            run = BtRun(unit, pid=self.pid, child=child, json_mode=json)
            run.owns_child = own
            return run.start(release=release, begun=begun)
        except BaseException:
            if own and child is not None:
                child.kill()
                child.close()
            raise


def _analyse(script: Script, resolver: Any, params: list[str], unsafe: bool = False) -> Any:
    """The semantic pass's analysis of ``script`` (types set in the tree)."""
    from .sema import analyse
    return analyse(script, resolver, params=params, unsafe=unsafe)


def resolver_for(pid: int | None, unsafe: bool = False,
                 command: Sequence[str] | None = None) -> Any:
    """The semantic pass's type resolver (bt-runtime's probes module)."""
    from .probes import Resolver
    return Resolver(pid=pid, unsafe=unsafe, command=command)


def resolve_point(ap: AttachPoint, pid: int | None) -> list[tuple[str, Any]]:
    """``(name, probe source)`` of every concrete probe ``ap`` names."""
    from .probes import resolve
    return [(r.name, r.source) for r in resolve(ap, pid=pid)]
