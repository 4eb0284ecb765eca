"""The USDT probe source the pyebpf-side scripts use.

``pyebpf.probes.usdt_source.usdt_probe_source`` when the library has it; otherwise
a stand-in with the same interface (``prog_type``, ``load_options``,
``arg_count``, ``emit_arg(p, dst, n, ctx)``, ``attach(loaded, pid=None)``)
that attaches a plain uprobe at the probe's note offset and reads register
arguments (``8@%rax``) from pt_regs -- which is what a USDT probe is, for
the benchmark's ``loop:hit`` (no semaphore, register arguments).

``METHOD`` says which one was used ("usdt" or "uprobe-at-note").
"""
from __future__ import annotations

from typing import Any

try:
    from pyebpf.probes.usdt_source import usdt_probe_source as _library_source
    METHOD = "usdt"
except ImportError:      # not written yet: the stand-in below
    _library_source = None
    METHOD = "uprobe-at-note"


class _NoteUprobe:
    def __init__(self, target: str, provider: str, name: str, pid: int | None) -> None:
        from pyebpf.attach import uprobe_load_options
        from pyebpf.usdt import read_notes
        notes = [n for n in read_notes(target) if n.provider == provider and n.name == name]
        if not notes:
            raise LookupError(f"no USDT probe {provider}:{name} in {target}")
        self.target, self.pid, self.notes = target, pid, notes
        self.args = notes[0].arguments
        for note in notes:
            if note.semaphore or any(a.kind.name != "REG" for a in note.arguments) \
                    or note.arguments != self.args:
                raise NotImplementedError(f"the stand-in handles one register-argument form "
                                          f"and no semaphore, not {note!r}")
        self.arg_count = len(self.args)
        self.load_options = uprobe_load_options()
        self.prog_type = self.load_options["prog_type"]

    def emit_arg(self, p: Any, dst: Any, n: int, ctx: Any) -> None:
        from pyebpf.ptregs import load_reg
        spec = self.args[n]
        load_reg(p, dst, spec.reg, ctx=ctx)
        if spec.size < 8:         # keep the argument's bytes only
            p.lsh(dst, 64 - 8 * spec.size)
            (p.arsh if spec.signed else p.rsh)(dst, 64 - 8 * spec.size)

    def attach(self, loaded: Any, pid: int | None = None) -> Any:
        from pyebpf.attach import attach_uprobes
        return attach_uprobes(loaded, self.target, [n.offset for n in self.notes],
                              pid=pid if pid is not None else self.pid)


def probe_source(target: str, provider: str, name: str, pid: int | None = None) -> Any:
    if _library_source is not None:
        return _library_source(target, provider, name, pid=pid)
    return _NoteUprobe(target, provider, name, pid)


def load(source: Any, program: Any) -> Any:
    from pyebpf.loader import load as _load
    opts = dict(source.load_options)
    opts.setdefault("prog_type", source.prog_type)
    return _load(program, **opts)
