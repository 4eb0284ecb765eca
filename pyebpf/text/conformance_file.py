"""bpf_conformance ``.data`` test files: sections ``asm``, ``result``, ``mem``,
``raw`` and ``error``, read the way the C++ runner (``bpf_test_parser.cc``) reads them.

* ``#`` starts a comment anywhere; a line containing ``--`` is a directive,
  recognised by *substring* in this order: ``asm``, ``result``, ``mem``,
  ``raw``, ``no register offset``, `` c``, ``error``; anything else makes the
  runner skip the file (:attr:`ConformanceTest.skip_reason`).
* ``result``: the last line, hex if it contains ``0x`` else decimal.
* ``mem``: whitespace-separated hex bytes (a uBPF hexdump prefix ``...:`` is skipped).
* ``raw``: one little-endian u64 per slot (``0x`` hex or decimal); a line of
  exactly eight two-digit hex tokens is read as the slot's bytes (the
  ``negative/unused-*.data`` files are written that way).
* ``error``: the expected error text (last line, trimmed).

``raw``, when present, wins over ``asm`` (:meth:`ConformanceTest.code`).
The asm text keeps the file's line numbers, so assembly errors point into the file.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field

from ..errors import AssemblyError
from ..program.core import Program

__all__ = ["ConformanceTest", "parse_conformance", "load_conformance"]

_DIRECTIVES = (("asm", "asm"), ("result", "result"), ("mem", "mem"), ("raw", "raw"),
               ("no register offset", None), (" c", None), ("error", "error"))
_NUM_RE = re.compile(r"\s*(0[xX][0-9a-fA-F]+|[0-9]+)")
_BYTE_ROW_RE = re.compile(r"\s*(?:[0-9a-fA-F]{2}\s+){7}[0-9a-fA-F]{2}\s*$")


@dataclass
class ConformanceTest:
    """One parsed ``.data`` file."""

    name: str
    path: str = "<string>"
    asm: str | None = None          #: the asm section, other lines blanked (keeps line numbers)
    raw: list[int] | None = None    #: the raw section: one u64 per slot
    mem: bytes = b""                #: the input memory
    result: int | None = None       #: the expected r0
    error: str | None = None        #: the expected error text
    skip_reason: str | None = None  #: why the C++ runner would skip this file
    sections: list[str] = field(default_factory=list)  #: directive keywords in file order

    def program(self, dialect: str = "mnemonic") -> Program:
        """The ``asm`` section assembled (errors name this file's lines)."""
        from .assembler import assemble
        if self.asm is None:
            raise ValueError(f"{self.path}: no -- asm section")
        return assemble(self.asm, dialect, self.path)

    def asm_bytes(self, dialect: str = "mnemonic") -> bytes:
        """The assembled ``asm`` section."""
        return self.program(dialect).encode()

    def raw_bytes(self) -> bytes | None:
        """The ``raw`` section as bytes, or None."""
        if self.raw is None:
            return None
        return b"".join(struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF) for v in self.raw)

    def code(self) -> bytes:
        """The program the runner would load: ``raw`` if present, else ``asm``
        assembled (empty if the file has neither)."""
        raw = self.raw_bytes()
        if raw is not None:
            return raw
        return b"" if self.asm is None else self.asm_bytes()


_HEX_BYTE_RE = re.compile(r"[0-9a-fA-F]{1,2}")
_RAW_RE = re.compile(r"0[xX][0-9a-fA-F]{1,16}|[0-9]{1,20}")


def _words(line: str) -> list[tuple[int, str]]:
    """(1-based column, word) of the white-space separated words of ``line``."""
    return [(m.start() + 1, m.group()) for m in re.finditer(r"\S+", line)]


def _shown(tok: str) -> str:
    return repr(tok if len(tok) <= 40 else tok[:30] + "...")


def _raw_slot(tok: str, path: str, lineno: int, col: int, line: str) -> int:
    """One ``-- raw`` slot: a u64 in 0x hex or decimal."""
    if not _RAW_RE.fullmatch(tok):
        raise AssemblyError(f"-- raw: {_shown(tok)} is not a 64-bit slot (0x hex or decimal)",
                            path, lineno, col, line)
    value = int(tok, 0) if tok[:2] in ("0x", "0X") else int(tok, 10)
    if value > 0xFFFFFFFFFFFFFFFF:
        raise AssemblyError(f"-- raw: {tok} does not fit in 64 bits", path, lineno, col, line)
    return value


def parse_conformance(text: str, path: str = "<string>") -> ConformanceTest:
    """Parse the text of a ``.data`` file.  A ``mem`` or ``raw`` word that is
    not a number is an :class:`~pyebpf.errors.AssemblyError` naming its line
    and column."""
    test = ConformanceTest(name=os.path.splitext(os.path.basename(path))[0], path=path)
    state = None
    asm_lines: list[str] = []
    raw: list[int] = []
    mem = bytearray()
    result_text = error_text = None
    result_line = 0
    have_asm = have_raw = False
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        hash_at = line.find("#")
        if hash_at >= 0:
            line = line[:hash_at]
        if "--" in line:
            for needle, section in _DIRECTIVES:
                if needle in line:
                    state = section
                    test.sections.append(needle.strip())
                    break
            else:
                test.skip_reason = f"unknown directive {line.strip()!r}"
                state = None
            asm_lines.append("")
            have_asm |= state == "asm"
            have_raw |= state == "raw"
            continue
        asm_lines.append(line if state == "asm" else "")
        if not line.strip():
            continue
        if state == "result":
            result_text, result_line = line, lineno
        elif state == "error":
            error_text = line.strip()
        elif state == "mem":
            for col, tok in _words(line):
                if tok.endswith(":"):
                    continue
                if not _HEX_BYTE_RE.fullmatch(tok):
                    raise AssemblyError(f"-- mem: {_shown(tok)} is not a hex byte (e.g. 0a)",
                                        path, lineno, col, line)
                mem.append(int(tok, 16))
        elif state == "raw":
            if _BYTE_ROW_RE.match(line):
                raw.append(struct.unpack("<Q", bytes(int(t, 16) for t in line.split()))[0])
            else:
                for col, tok in _words(line):
                    raw.append(_raw_slot(tok, path, lineno, col, line))
    if have_asm:
        test.asm = "\n".join(asm_lines)
    if have_raw:
        test.raw = raw
    test.mem = bytes(mem)
    test.error = error_text
    if result_text is not None:
        m = _NUM_RE.match(result_text.replace("0X", "0x"))
        if m:
            s = m.group(1)
            if len(s) > 40:
                raise AssemblyError(f"-- result: {_shown(s)} is too long for a 64-bit value",
                                    path, result_line, m.start(1) + 1, result_text)
            test.result = int(s, 16) if "0x" in result_text else int(s, 10)
    if test.skip_reason is None:
        if test.result is None and test.error is None:
            test.skip_reason = "no result and no error"
        elif not (raw or (test.asm and test.asm.strip())):
            test.skip_reason = "no instructions"
    return test


def load_conformance(path: str | os.PathLike[str]) -> ConformanceTest:
    """Read and parse the ``.data`` file at ``path``."""
    from .lexer import read_source
    name = os.fspath(path)
    return parse_conformance(read_source(name), name)
