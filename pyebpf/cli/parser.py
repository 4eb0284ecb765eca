"""The argument parser class of every ``pyebpf`` command."""
from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import _SubParsersAction
    from typing import Callable, NoReturn, TypeAlias

    #: what each sub-command's ``register`` gets: ``add_parser`` makes its parser
    Subparsers: TypeAlias = "_SubParsersAction[Parser]"
else:   # (at run time, where documentation tools resolve it, the class unsubscripted)
    Subparsers = argparse._SubParsersAction

__all__ = ["Parser"]        # (add_command, add_program_command: for the sub-command modules)


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line,
    ``pyebpf COMMAND: error: MESSAGE (see 'pyebpf COMMAND --help')``, exit
    status 2 (argparse prints the whole usage block first, which for
    ``trace`` is longer than the message)."""

    #: (the root parser) each sub-command's parser by name, set by build_parser
    commands: dict[str, Parser]
    #: when set, the whole ``--help`` text; its first paragraph (the usage) is
    #: also printed after a usage error, as bpftrace does (``pyebpf bt``)
    help_text: str | None = None

    def error(self, message: str) -> NoReturn:
        """Print the one-line usage error (then the usage of :attr:`help_text`,
        when set) and exit with status 2."""
        if self.help_text is not None:     # (its first paragraph: the usage)
            usage = self.help_text.split("\n\n", 1)[0]
            self.exit(2, f"{self.prog}: error: {message}\n{usage}\n(see '{self.prog} --help')\n")
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def format_help(self) -> str:
        """:attr:`help_text` when set, else argparse's help."""
        return self.help_text if self.help_text is not None else super().format_help()


def add_command(subparsers: Subparsers, name: str, help: str, description: str,
                epilog: str) -> Parser:
    """The parser of sub-command ``name``: ``help`` for the command list,
    ``description`` and ``epilog`` printed as written (their line breaks kept)."""
    return subparsers.add_parser(name, help=help, description=description, epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def add_program_command(subparsers: Subparsers, name: str, help: str, description: str,
                        epilog: str, *, cmd_help: str, pid_help: str,
                        cmd_type: Callable[[str], list[str]] | None = None) -> Parser:
    """The parser of a bpftrace-language command (``bt``, ``export``), made
    by :func:`add_command`, with the arguments they share:
    FILE, ARG..., ``-e PROGRAM``, ``-c CMD`` and ``-p PID`` (read them with
    :func:`~pyebpf.cli.runner.program_text` and :func:`~pyebpf.cli.runner.target_error`;
    ``-p`` is kept as written: target_error checks it as bpftrace does).
    ``cmd_type`` splits ``-c``'s words (default: as a shell would)."""
    from . import command_line
    p = add_command(subparsers, name, help, description, epilog)
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="the program's file (unless -e); further words are $1, $2...")
    p.add_argument("params", metavar="ARG", nargs="*", help="positional parameters $1, $2...")
    p.add_argument("-e", dest="program", metavar="PROGRAM", help="the program's text")
    p.add_argument("-c", dest="cmd", metavar="CMD", type=cmd_type or command_line,
                   help=cmd_help)
    p.add_argument("-p", dest="pid", metavar="PID", help=pid_help)
    return p
