"""``pyebpf list``: list the USDT probes of a file or a process, with their
locations, semaphores and decoded arguments."""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import pid
from .parser import Parser

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence, TextIO

    from ..usdt.notes import UsdtNote, UsdtProbe

from .parser import Subparsers   # (at run time too, for documentation tools)

DESCRIPTION = """\
List the USDT (sys/sdt.h) probes of an ELF file, or of every module a running
process maps: provider, name, each location (a probe can have many, each with
its own semaphore and argument specs), the file offsets a uprobe needs, and
the decoded arguments.  Reads the .note.stapsdt notes directly: no kernel,
BCC, libbpf or readelf involved.

TARGET is a path, a library name (libc, libpython3.11, libstdc++) looked up
in the library directories, or a program name on $PATH.  With -p PID, every
module the process maps is read (as /proc/PID/root/..., so processes in
containers work too); a TARGET then keeps only the modules whose path or file
name matches it (shell wildcards allowed).
"""

EPILOG = """\
output:
  text (default)  one block per probe; each location with its address, file
                  offset, semaphore and arguments (kind, C type, place)
  --brief         one line per probe: usdt:PATH:PROVIDER:NAME
  --json          ONE JSON array, one object per note, with at least: path,
                  provider, name, location, base, semaphore (integers as in
                  the note), args (the argument string), arguments (decoded
                  specs: kind, size, signed, float, reg, offset, index,
                  scale, symbol, imm, value...), plus address, offset,
                  semaphore_offset, arch, traceable and errors

examples:
  pyebpf list /usr/bin/python3.11
  pyebpf list libpython3.11 'python:function__*'
  pyebpf list -P hotspot -n 'gc__*' /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so
  pyebpf list -p 1234 --json
  pyebpf list -p 1234 'libpython*'
"""


class _IntermixedParser(Parser):
    """Accepts options between the positionals (``list PATH --json PATTERN``),
    which plain argparse refuses for optional positionals."""

    _inner = False

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: Any = None) -> tuple[Any, list[str]]:
        """Parse with options anywhere (``parse_known_intermixed_args``)."""
        if self._inner:
            return super().parse_known_args(args, namespace)
        self._inner = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inner = False


def register(subparsers: Subparsers) -> None:
    """Add the ``list`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("list", help="list the USDT probes of a file or process",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _IntermixedParser
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="ELF path, library name (libc) or program name; with -p, a filter "
                        "on the process's modules")
    p.add_argument("pattern", metavar="PATTERN", nargs="?",
                   help="PROVIDER:NAME or NAME, shell wildcards allowed "
                        "(e.g. 'python:function__*', '*gc*')")
    p.add_argument("-p", "--pid", type=pid, metavar="PID",
                   help="list the probes of every module process PID maps")
    p.add_argument("-P", "--provider", metavar="GLOB", help="only probes of this provider")
    p.add_argument("-n", "--name", metavar="GLOB", help="only probes with this name")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print one JSON array with one object per note")
    fmt.add_argument("--brief", action="store_true",
                     help="one line per probe: usdt:PATH:PROVIDER:NAME")
    p.set_defaults(func=run)


def _filters(args: argparse.Namespace) -> tuple[str | None, str | None]:
    provider, name = args.provider, args.name
    if args.pattern:
        if ":" in args.pattern:
            pp, _, pn = args.pattern.rpartition(":")
            provider = provider or pp or None
            name = name or pn or None
        else:
            name = name or args.pattern
    return provider, name


def _sources(args: argparse.Namespace) -> list[tuple[str, str, str | None]]:
    """(path to open, path to show, module path in the process or None)."""
    from fnmatch import fnmatchcase

    from ..usdt import process_modules, resolve_target
    if args.pid is None:
        path = resolve_target(args.target)
        return [(path, path, None)]
    out: list[tuple[str, str, str | None]] = []
    for m in process_modules(args.pid):
        if args.target:
            t = args.target
            base = os.path.basename(m.path)
            if not (fnmatchcase(m.path, t) or fnmatchcase(base, t) or t in base
                    or fnmatchcase(base, t + "*")):
                continue
        out.append((m.host_path, m.host_path, m.path))
    return out


def _has_stapsdt(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    """List the probes the arguments select; the exit status."""
    from ..errors import UsdtError
    from ..usdt import UsdtFile, group_probes
    from ..usdt.notes import _filter

    if args.pid is None and not args.target:
        print("pyebpf list: give a TARGET (path, library or program name) or -p PID",
              file=sys.stderr)
        return 2
    provider, name = _filters(args)
    sources = _sources(args)
    notes: list[tuple[UsdtNote, str | None]] = []
    failed = 0
    for path, shown, module in sources:
        if args.pid is not None:
            if not _has_stapsdt(path):
                continue
            try:
                f = UsdtFile(path, display_path=shown)
                if not f.has_notes:
                    continue
                found = list(_filter(f.iter_notes(), provider, name))
            except (UsdtError, OSError) as exc:
                failed += 1
                print(f"pyebpf list: skipping {module}: {exc}", file=sys.stderr)
                continue
        else:
            f = UsdtFile(path, display_path=shown)
            found = list(_filter(f.iter_notes(), provider, name))
        notes.extend((n, module) for n in found)

    out = sys.stdout
    if args.json:
        items = []
        for n, module in notes:
            d = n.to_dict()
            if module is not None:
                d["pid"] = args.pid
                d["module"] = module
            items.append(d)
        json.dump(items, out, indent=1)
        out.write("\n")
        return 0
    if not notes:
        where = f"process {args.pid}" if args.pid is not None else sources[0][1]
        what = " matching the filter" if (provider or name) else ""
        print(f"no USDT probes{what} in {where}", file=sys.stderr)
        return 1 if failed else 0
    probes = group_probes(n for n, _ in notes)
    if args.brief:
        for p in probes:
            out.write(f"usdt:{p.path}:{p.provider}:{p.name}\n")
        return 0
    _print_text(probes, out)
    return 0


def _hex_or(fn: Callable[[], int]) -> str:
    from ..errors import UsdtNoteError
    try:
        return f"{fn():#x}"
    except UsdtNoteError as exc:
        return f"? ({exc.reason})"


def _print_text(probes: list[UsdtProbe], out: TextIO) -> None:
    last_path = None
    for p in probes:
        elf = p.elf
        if p.path != last_path:
            if last_path is not None:
                out.write("\n")
            tag = f"{elf.arch}, {elf.elf_type}"
            if not elf.traceable:
                tag += f"; not traceable here: {elf.untraceable_reason}"
            out.write(f"{p.path}  ({tag})\n")
            last_path = p.path
        sems = p.semaphores
        head = f"  {p.provider}:{p.name}"
        n_loc = len(p.locations)
        head += f"  [{n_loc} location{'s' if n_loc != 1 else ''}"
        if len(sems) == 1:
            head += f", semaphore {sems[0]:#x} (file offset " \
                    f"{_hex_or(lambda: p.locations[0].semaphore_offset)})"
        elif not sems:
            head += ", no semaphore"
        head += "]"
        out.write(head + "\n")
        for n in p.locations:
            line = f"    location {n.location:#x}"
            if n.address != n.location:
                line += f" (address {n.address:#x})"
            line += f"  file offset {_hex_or(lambda: n.offset)}  base {n.base:#x}"
            if len(sems) > 1:
                line += f"  semaphore {n.semaphore:#x}" if n.semaphore else "  no semaphore"
                if n.semaphore:
                    line += f" (file offset {_hex_or(lambda: n.semaphore_offset)})"
            out.write(line + "\n")
            if not n.arguments:
                out.write("      (no arguments)\n")
            width = max((len(a.text) for a in n.arguments), default=0)
            for i, a in enumerate(n.arguments):
                out.write(f"      arg{i:<2} {a.text:<{width}}  {a.describe()}\n")
