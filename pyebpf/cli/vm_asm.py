"""The ``asm/`` files (text assembly with a ``# pyebpf:`` header) in the VM:
what ``pyebpf vm run`` / ``vm step`` do with them (:mod:`.vm`).

The header (parsed by :mod:`pyebpf.session.asmfile`) declares the maps the
programs use and the events they send; :func:`read` turns a file into
:class:`AsmProgram` objects -- each program's instructions, with the maps
made from the header's declarations -- so ``pyebpf vm run`` / ``vm step`` run
what ``pyebpf run`` loads into the kernel, without a kernel:

* placeholders ``${NAME}`` in a program's code take the header's defaults and
  the values given (``-D NAME=VALUE``); ``${PID}`` is 0 unless given.  The
  attach line is not needed to run in the VM, so a parameter used only there
  (``BINARY``, ``FUNC``...) need not be given;
* ``${args.NAME}`` and ``.arg`` need the probe's description (a tracepoint's
  format from tracefs, a binary's USDT notes): the probe is resolved only when
  a program uses them, and a failure names the line;
* :meth:`AsmPrograms.report` prints what ``pyebpf run`` prints at the end: the
  output map's events (read with :mod:`pyebpf.events`' readers from the VM's
  rings) and the maps declared with ``show=``.
"""
from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TextIO

    from ..isa import Insn
    from ..session.asmfile import AsmFile, ProgramDecl
    from ..vm import Vm

_HEADER_LINE = re.compile(r"^\s*#\s*pyebpf:", re.M)


def is_asm_file(text: str) -> bool:
    """Whether ``text`` has an asm-file header (``# pyebpf:`` lines: programs
    and maps, or maps alone, as ``pyebpf load``/``explain``/``run --type`` read)."""
    return _HEADER_LINE.search(text) is not None


class AsmPrograms:
    """The programs of one asm file, assembled for the VM.

    ``programs``: (name, instructions) in file order; ``maps``: name ->
    :class:`~pyebpf.maps.MapSpec` of every declared map; ``file``: the parsed
    :class:`~pyebpf.session.asmfile.AsmFile`.
    """

    def __init__(self, file: AsmFile, programs: list[tuple[str, list[Insn]]],
                 maps: dict[str, Any]) -> None:
        self.file = file
        self.programs = programs
        self.maps = maps
        self._reader: Any = None

    def select(self, name: str | None) -> list[tuple[str, list[Insn]]]:
        """The program called ``name`` (None: all of them, in file order)."""
        if name is None:
            return self.programs
        for pname, insns in self.programs:
            if pname == name:
                return [(pname, insns)]
        from ..errors import OptionError
        raise OptionError(f"{self.file.filename} has no program {name!r}; its programs: "
                          f"{', '.join(p for p, _ in self.programs)}")

    def open_output(self, vm: Vm) -> None:
        """Start reading the output map's events from ``vm`` (before it runs)."""
        if not self.file.outputs or self._reader is not None:
            return
        from ..events import PerfBuffer, RingBufferReader
        o = self.file.outputs[0]
        target = vm.maps[o.map]
        if self.file.maps[o.map].type == "ringbuf":
            self._reader = RingBufferReader(target, decode=o.struct_format())
        else:
            self._reader = PerfBuffer(target, decode=o.struct_format(), cpus=[vm.cpu],
                                      on_lost=lambda cpu, n: None)

    def report(self, vm: Vm, out: TextIO) -> None:
        """Print the events waiting in the output map and the ``show=`` maps,
        as ``pyebpf run`` does."""
        from ..draw.render import format_count, format_hist
        from ..session.asmfile import AsmEvent, AsmSession
        if self._reader is not None:
            o = self.file.outputs[0]
            for rec in self._reader.drain():
                values = [t.decode(v) for (_, t), v in zip(o.fields, rec)]
                out.write(AsmEvent(o, values).line)
            lost = self._reader.lost
            if lost:
                out.write(f"({lost} events lost)\n")
        for d in self.file.maps.values():
            if d.show == "none":
                continue
            # AsmSession.map_data reads ``self.maps[name]``: the VM's maps have the same API
            data = AsmSession.map_data(_Maps(vm.maps), d)  # type: ignore[arg-type]
            if d.show == "count":
                text = format_count(d.name, data)
                out.write(text + "\n" if text else "")
            else:
                out.write(format_hist(d.name, data, linear=d.linear))

    def close(self) -> None:
        """Close the output reader."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None


class _Maps:
    """Something with ``.maps`` (what :meth:`AsmSession.map_data` reads)."""

    def __init__(self, maps: dict[Any, Any]) -> None:
        self.maps = maps


def read(text: str, filename: str, values: dict[str, str] | None = None) -> AsmPrograms:
    """Parse an asm file and assemble each program for the VM (see the module docs)."""
    from ..session.asmfile import AsmFileError, parse_asm_file
    af = parse_asm_file(text, filename, need_program=False)
    given = dict(values or {})
    unknown = set(given) - set(af.params) - {"PID"}
    if unknown:
        raise AsmFileError(f"unknown parameter(s) {', '.join(sorted(unknown))}; this file "
                           f"has: {', '.join(af.params) or 'none'}", af.filename)
    vals = {p.name: p.default for p in af.params.values() if p.default is not None}
    vals["PID"] = "0"
    vals.update(given)
    programs = [(pd.name, _assemble(af, pd, vals)) for pd in af.programs]
    if not af.programs:                # maps alone: the whole file is the one program
        programs = [(os.path.basename(af.filename), _whole(af, vals))]
    return AsmPrograms(af, programs, {d.name: d.spec() for d in af.maps.values()})


def _assemble(af: AsmFile, pd: ProgramDecl, values: dict[str, str]) -> list[Insn]:
    """One program's code, placeholders and ``.arg`` expanded, lines kept."""
    from ..session.asmfile import _ARG_DIRECTIVE, AsmSession, substitute
    from ..text import assemble
    probe = _Probe(af, pd, values)
    lines = [""] * len(af.text.splitlines())
    for lineno, text in pd.body:
        text = substitute(text, values, af.filename, lineno, probe.field_offset(lineno))
        m = _ARG_DIRECTIVE.match(text)
        if m:
            text = AsmSession._expand_arg(probe.get(lineno), m, af.filename, lineno)
        lines[lineno - 1] = text
    return list(assemble("\n".join(lines), "llvm", af.filename).finalize())


def _whole(af: AsmFile, values: dict[str, str]) -> list[Insn]:
    """A header of maps alone: the whole file is one program (placeholders
    expanded, lines kept), as ``pyebpf run FILE --type TYPE`` reads it."""
    from ..session.asmfile import substitute
    from ..text import assemble
    code = "\n".join(substitute(line, values, af.filename, n)
                     for n, line in enumerate(af.text.splitlines(), 1))
    return list(assemble(code, "llvm", af.filename).finalize())


class _Probe:
    """The program's probe source, resolved on first need (``${args.X}``, ``.arg``)."""

    def __init__(self, af: AsmFile, pd: ProgramDecl, values: dict[str, str]) -> None:
        self.af, self.pd, self.values = af, pd, values
        self.source: Any = None

    def get(self, line: int) -> Any:
        if self.source is None:
            from ..errors import PyebpfError
            from ..probes.sources import probe_source
            from ..session.asmfile import AsmFileError, substitute
            try:
                attach = substitute(self.pd.attach, self.values, self.af.filename, self.pd.line)
                self.source = probe_source(attach, None)
            except PyebpfError as exc:
                raise AsmFileError(f"program {self.pd.name}: ${{args.NAME}} and .arg need the "
                                   f"probe {self.pd.attach!r} described: "
                                   f"{getattr(exc, 'reason', None) or exc}",
                                   self.af.filename, line) from None
        return self.source

    def field_offset(self, line: int) -> Callable[[str], object]:
        def offset(name: str) -> object:
            source = self.get(line)
            field = getattr(source, "field", None)
            if field is None:
                from ..session.asmfile import AsmFileError
                raise AsmFileError(f"${{args.{name}}}: only tracepoint programs have args",
                                   self.af.filename, line)
            return field(name).offset
        return offset
