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


def parse_conformance(text: str, path: str = "<string>") -> ConformanceTest:
    """Parse the text of a ``.data`` file."""
    test = ConformanceTest(name=os.path.splitext(os.path.basename(path))[0], path=path)
    state = None
    asm_lines: list[str] = []
    raw: list[int] = []
    mem = bytearray()
    result_text = error_text = None
    have_asm = have_raw = False
    for line in text.split("\n"):
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
            result_text = line
        elif state == "error":
            error_text = line.strip()
        elif state == "mem":
            for tok in line.split():
                if tok.endswith(":"):
                    continue
                mem.append(int(tok, 16) & 0xFF)
        elif state == "raw":
            if _BYTE_ROW_RE.match(line):
                raw.append(struct.unpack("<Q", bytes(int(t, 16) for t in line.split()))[0])
            else:
                for tok in line.split():
                    raw.append(int(tok, 16) if tok[:2].lower() == "0x" else int(tok, 10))
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
            test.result = int(s, 16) if "0x" in result_text else int(s, 10)
    if test.skip_reason is None:
        if test.result is None and test.error is None:
            test.skip_reason = "no result and no error"
        elif not (raw or (test.asm and test.asm.strip())):
            test.skip_reason = "no instructions"
    return test


def load_conformance(path: str | os.PathLike) -> ConformanceTest:
    """Read and parse the ``.data`` file at ``path``."""
    with open(path, encoding="utf-8") as f:
        return parse_conformance(f.read(), os.fspath(path))
