"""The argument parser class of every ``pyebpf`` command."""
from __future__ import annotations

import argparse

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line,
    ``pyebpf COMMAND: error: MESSAGE (see 'pyebpf COMMAND --help')``, exit
    status 2 (argparse prints the whole usage block first, which for
    ``trace`` is longer than the message)."""

    #: (the root parser) each sub-command's parser by name
    commands: dict[str, "Parser"] = {}

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
