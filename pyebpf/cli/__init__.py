"""``python -m pyebpf`` / ``pyebpf``: the command line.

Thin by design: each sub-command lives in its own module of this package,
declares its arguments in ``register(subparsers)`` and imports the heavy
layers only when it runs, so that ``--help`` and start-up stay fast.

Exit status: 0 success, 1 failure (bad input, kernel refusal), 2 usage error,
130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# Sub-command modules, in the order --help lists them.
COMMANDS = ["demo", "asm", "disasm", "conformance", "list", "trace", "run"]


class _VersionAction(argparse.Action):
    """``--version``: print ``pyebpf X.Y.Z`` and exit (before the sub-command
    is required, as argparse's own version action does)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help="print pyebpf's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from .. import __version__
        print(f"pyebpf {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyebpf",
        description="A pure-Python eBPF toolkit: assemble, load, attach and read eBPF "
                    "programs with no LLVM, BCC or libbpf.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"pyebpf.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..errors import PyebpfError
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except PyebpfError as exc:
        print(f"pyebpf {args.command}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"pyebpf {args.command}: {exc}", file=sys.stderr)
        return 1
