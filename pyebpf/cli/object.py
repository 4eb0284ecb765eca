"""``pyebpf object``: what a clang-built BPF object holds and needs; ``--load``
loads it and says, per program, what the kernel made of it."""
from __future__ import annotations

import argparse

from .parser import Subparsers, add_command   # (Subparsers: at run time too, for the docs)

DESCRIPTION = """\
Show a BPF object built by clang (clang -O2 -g -target bpf -c prog.bpf.c):
its programs (section, name, type), its maps (BTF-defined, legacy and global
data), its global variables, and what loading it needs (map and global-data
relocations, bpf-to-bpf calls, CO-RE relocations, kconfig and ksym externs).

With --load, everything is loaded into the kernel as libbpf would load it,
and one line per program says 'loaded', 'rejected: MESSAGE' (the verifier's
words, with the C source line) or 'skipped: REASON' (this kernel refuses
every program of that type, found by a probe load); a last line counts them.
When the kernel refuses the object's BTF, a warning on stderr says why, the
object is loaded without it, and a rejection it causes says so.

Section names are matched as libbpf 0.x matched them: xdp/NAME,
classifier/NAME, perf_event/... are taken (the listing marks such a program
"libbpf 0.x section name"); libbpf 1.x refuses them, and so does
--strict-sections (the program is rejected, naming the rule).
Nothing stays in the kernel afterwards (except maps pinned by name, as
libbpf pins them under /sys/fs/bpf).
"""

EPILOG = """\
examples:
  pyebpf object execsnoop.bpf.o
  pyebpf object execsnoop.bpf.o --load
  pyebpf object filter.bpf.o --load --set targ_pid=1234

exit status: 0 when every program loaded or was skipped, 1 otherwise.
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``object`` sub-command to ``subparsers``."""
    p = add_command(subparsers, "object", "show or load a clang-built BPF object (.o)",
                    DESCRIPTION, EPILOG)
    p.add_argument("file", metavar="OBJ", help="the BPF ELF object")
    p.add_argument("--load", action="store_true",
                   help="load every map and program, and report each program's verdict")
    p.add_argument("--strict-sections", action="store_true",
                   help="match section names as libbpf 1.x does (see above)")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                   help="set a global variable before loading (an int, or text); repeatable")
    p.set_defaults(func=run)


def _parse_set(text: str) -> tuple[str, object]:
    from ..errors import OptionError
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise OptionError(f"--set wants NAME=VALUE, not {text!r}")
    try:
        return name, int(value, 0)
    except ValueError:
        return name, value


def _show(obj: object) -> None:
    from ..objects import BpfObject
    assert isinstance(obj, BpfObject)
    print(f"object {obj.path}: license {obj.license or '(none)'!r}")
    print(f"programs ({len(obj.programs)}):")
    for p in obj.programs.values():
        note = (" [libbpf 0.x section name: libbpf 1.x refuses it]"
                if p.lenient_section else "")
        print(f"  {p.section:<40} {p.name:<24} {p.kind} ({p.type_name}){note}")
    print(f"maps ({len(obj.map_defs)}):")
    for name, d in obj.map_defs.items():
        print(f"  {name:<24} {d.describe()}")
    if len(obj.globals):
        print(f"globals ({len(obj.globals)}):")
        for name in obj.globals:
            sec, off, size, _ = obj.globals.layout[name]
            print(f"  {name:<24} {sec}+{off}, {size} bytes")
    print("needs:")
    for sec, counts in obj.needs().items():
        parts = [f"{n} {what[:-1] if n == 1 and what.endswith('s') else what}"
                 for what, n in counts.items() if n]
        print(f"  {sec}: {', '.join(parts) if parts else 'nothing'}")
    if obj.externs:
        print("externs: " + ", ".join(f"{n} ({k})" for n, k in obj.externs.items()))


def _load(obj: object) -> None:
    """Load ``obj`` (strict=False); its warnings (the kernel refused the
    object's BTF) as ``pyebpf object: warning: ...`` lines on stderr, once each."""
    import warnings

    from . import report
    from ..objects import BpfObject
    assert isinstance(obj, BpfObject)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            obj.load(strict=False)
        finally:
            said = set()
            for w in caught:
                text = str(w.message)
                if text not in said:
                    said.add(text)
                    report("object", f"warning: {text}")


def run(args: argparse.Namespace) -> int:
    """Show (or load) the object; the exit status."""
    from ..objects import open_object
    settings = [_parse_set(s) for s in args.set]
    with open_object(args.file, strict_sections=args.strict_sections) as obj:
        for name, value in settings:
            obj.globals[name] = value
        if not args.load:
            _show(obj)
            return 0
        _load(obj)
        counts = {"loaded": 0, "rejected": 0, "skipped": 0}
        for p in obj.programs.values():
            counts[p.status] = counts.get(p.status, 0) + 1
            line = f"program {p.name} ({p.type_name}): {p.status}"
            if p.status != "loaded":
                line += f": {p.reason}"
            elif p.lenient_section:
                line += " (libbpf 0.x section name: libbpf 1.x refuses it)"
            print(line, flush=True)
        for text in obj.empty_slots:
            print(text)
        print(f"{counts['loaded']} loaded, {counts['rejected']} rejected, "
              f"{counts['skipped']} skipped")
        return 1 if counts["rejected"] else 0
