"""The one lexer of both text dialects, and the value checks they share.

A source line goes through three steps, all here:

1. :func:`split_line` removes what is not assembly -- comments (``#`` at the
   start or after white space, ``//``, a ``;`` that starts a line), the
   decorations that ``llvm-objdump`` and the kernel's verifier log print
   around an instruction (``12:`` index, raw byte columns, ``(79)`` opcode,
   ``<LBB0_2>`` jump annotations, the ``; R1=ctx() ...`` register state) --
   and splits the rest into ``;``-separated statements, keeping the column of
   each piece.
2. :func:`tokenize` turns one statement into :class:`Tok` tuples.
3. The dialect parser checks and converts operands with :func:`reg`,
   :func:`imm32`, :func:`off16`, :func:`imm64` and :func:`rel32`, which raise
   :class:`TextError` naming the offending column.

Columns are 1-based, as in compiler messages.
"""
from __future__ import annotations

import re
from typing import NamedTuple, cast

__all__ = ["Tok", "TokValue", "TextError", "tokenize", "fast_tokenize",
           "split_line", "is_call_relocation", "reg", "imm32", "off16", "imm64", "rel32",
           "describe", "decode_source", "read_source"]


class TextError(Exception):
    """A parse error inside one line; the assembler adds file, line and text.

    ``col`` is the 1-based column of the offending token.  ``call_imm`` is
    set for ``call -N`` only: refused unless llvm-objdump's relocation line
    follows it (see :func:`is_call_relocation`), which makes it the relative
    call ``imm`` (``src_reg=1``).
    """

    def __init__(self, message: str, col: int, call_imm: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.col = col
        self.call_imm = call_imm


#: What :attr:`Tok.value` holds, by the token's key: an ``int`` for a register
#: (``r``, ``w``, ``%r``, ``%w``: its number) or a number (``n``), a ``(name,
#: number)`` pair for ``idnum``, the text (``str``) for every other key.
TokValue = int | str | tuple[str, int] | None


class Tok(NamedTuple):
    """One token.

    ``key`` is what grammars match on: ``"r"``/``"w"`` (64/32-bit register),
    ``"%r"``/``"%w"`` (mnemonic-dialect register), ``"n"`` (unsigned number),
    ``"id"`` (a name), ``"idnum"`` (``name#N``, as the verifier prints calls),
    ``"aop"`` (``+=``, ``s>>=``...), ``"cop"`` (``==``, ``s<``, ``&``...) or the
    punctuation character itself.  ``text`` is the token as written and
    ``col`` its 1-based column (0 from :func:`fast_tokenize`).  ``value`` is
    the register number, the integer, ``(name, N)`` or the text (see
    :data:`TokValue`); a grammar knows which from the key and narrows it with
    ``cast``.  ``hex`` tells how a number was written.
    """

    key: str
    text: str
    col: int
    value: int | str | tuple[str, int] | None = None    # (TokValue, spelled out for pdoc)
    hex: bool = False


_TOKEN_ALTERNATIVES = r"""
 (?P<idnum>[A-Za-z_]\w*(?:-[A-Za-z_]\w*)*\#-?\d+(?![\w]))
|(?P<num>0[xX][0-9a-fA-F]+(?![\w.])|[0-9]+(?![\w.]))
|(?P<reg>%?[rRwW][0-9]+(?![\w.]))
|(?P<op>s>>=|s/=|s%=|s>=|s<=|s>|s<|<<=|>>=|\+=|-=|\*=|/=|%=|&=|\|=|\^=|==|!=|>=|<=|[<>&])
|(?P<id>[A-Za-z_.$][\w.$]*)
|(?P<p>[-+*/()\[\],:=])
"""
_TOKEN_RE = re.compile(r"[ \t]*(?:" + _TOKEN_ALTERNATIVES + r"|(?P<bad>\S))", re.X)
# the same grammar for the fast path: (token, bad character) pairs, no match objects
_FAST_RE = re.compile(r"[ \t]*(?:(" + re.sub(r"\(\?P<\w+>", "(?:", _TOKEN_ALTERNATIVES)
                      + r")|(\S))", re.X)
_TOK_CACHE: dict[str, "Tok"] = {}

_COMPARE = frozenset(("==", "!=", ">", ">=", "<", "<=", "s>", "s>=", "s<", "s<=", "&"))


def tokenize(text: str, col: int = 1) -> list[Tok]:
    """Tokens of one statement; ``col`` is the column where ``text`` starts."""
    out: list[Tok] = []
    append = out.append
    base = col - 1
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind is None:  # trailing white space
            break
        s = m.group(kind)
        c = m.start(kind) + 1 + base
        if kind == "reg":
            head = s[0]
            if head == "%":
                append(Tok("%r" if s[1] in "rR" else "%w", s, c, _number(s, s[2:], 10, c)))
            else:
                append(Tok("r" if head in "rR" else "w", s, c, _number(s, s[1:], 10, c)))
        elif kind == "num":
            if s[:2] in ("0x", "0X"):
                append(Tok("n", s, c, _number(s, s[2:], 16, c), True))
            else:
                append(Tok("n", s, c, _number(s, s, 10, c)))
        elif kind == "id":
            append(Tok("id", s, c, s))
        elif kind == "p":
            append(Tok(s, s, c, s))
        elif kind == "op":
            append(Tok("cop" if s in _COMPARE else "aop", s, c, s))
        elif kind == "idnum":
            name, _, num = s.partition("#")
            append(Tok("idnum", s, c, (name, _number(s, num, 10, c))))
        else:
            raise TextError(f"unexpected character {s!r}", c)
    return out


#: significant digits a number may have: more than any 64-bit value needs,
#: far fewer than Python's int() refuses (4300) or that would take time
MAX_DIGITS = 40


def _number(token: str, digits: str, base: int, col: int) -> int:
    """The value of ``digits``; a number too long for any eBPF field is a
    :class:`TextError` that quotes it shortened."""
    if len(digits) > MAX_DIGITS and len(digits.lstrip("0+-")) > MAX_DIGITS:
        shown = f"{token[:12]}...{token[-4:]}"
        raise TextError(f"number {shown} is too long ({len(digits)} digits): no eBPF "
                        f"field holds more than 64 bits", col)
    return int(digits, base)


def fast_tokenize(text: str) -> list[Tok] | None:
    """Tokens of one statement without columns (``col`` is 0), or None if the
    text has a character no token starts with.

    Tokens are shared from a cache, so this is several times faster than
    :func:`tokenize`; a parser that fails on these tokens re-runs on
    :func:`tokenize` to report the column.
    """
    cache = _TOK_CACHE
    pairs = _FAST_RE.findall(text)
    try:
        return [cache[good] for good, _ in pairs]   # '' (a bad character) is never cached
    except KeyError:
        pass
    out: list[Tok] = []
    append = out.append
    for good, bad in pairs:
        if bad:
            return None
        t = cache.get(good)
        if t is None:
            if len(cache) >= 1 << 16:
                cache.clear()
            try:
                (t,) = tokenize(good, 0)
            except TextError:          # the slow path reports it with its column
                return None
            t = cache[good] = t._replace(col=0)
        append(t)
    return out


# ---------------------------------------------------------------------------
# bytes -> text

def decode_source(data: bytes, filename: str = "<string>") -> str:
    """``data`` decoded as UTF-8; anything else is an
    :class:`~pyebpf.errors.AssemblyError` naming the line and column of the
    first byte that does not decode (a binary file given as source)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from ..errors import AssemblyError
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, start) + 1
        end = data.find(b"\n", exc.start)
        text = data[start:end if end >= 0 else len(data)].decode("utf-8", "replace")
        column = len(data[start:exc.start].decode("utf-8", "replace")) + 1
        shown = text if len(text) <= 200 and text.replace("\t", " ").isprintable() else None
        raise AssemblyError(f"not UTF-8 text: byte {data[exc.start]:#04x} does not decode "
                            f"(is this a binary file?)", filename, line, column, shown) from None


def read_source(path: str) -> str:
    """The text of the file at ``path`` (``-``: standard input), checked by
    :func:`decode_source`.  OSError when it cannot be read."""
    if path == "-":
        import sys
        return decode_source(sys.stdin.buffer.read(), "<stdin>")
    with open(path, "rb") as f:
        return decode_source(f.read(), path)


# ---------------------------------------------------------------------------
# lines -> statements

# "  12:" index and optional raw-bytes columns (8 or 16 hex pairs) of llvm-objdump,
# or the "12: (79) " / "12: 0.....6... (79) " prefix of a verifier log / bpftool line.
_PREFIX_RE = re.compile(
    r"[ \t]*\d+:(?:[ \t]+|$)(?:"
    r"(?:[0-9a-fA-F]{2}[ \t]+){8}(?:(?:[0-9a-fA-F]{2}[ \t]+){8})?"
    r"|(?:[0-9.]{4,}[ \t]+)?\((?P<op>[0-9a-fA-F]{2})\)[ \t]+"
    r")?")
# a verifier line without its index: "(79) r2 = ..."
_OPCODE_RE = re.compile(r"[ \t]*\((?P<op>[0-9a-fA-F]{2})\)[ \t]+")
# objdump symbol line "0000000000000198 <endian>:"
_SYMBOL_RE = re.compile(r"[ \t]*[0-9a-fA-F]{8,16} <(?P<name>[A-Za-z_.$][\w.$]*)>:[ \t]*$")
# lines of llvm-objdump/bpftool output that carry no instruction
_NOISE_RE = re.compile(
    r"[ \t]*(?:Disassembly of section .*:|\S+:[ \t]+file format .*|[0-9a-fA-F]+:[ \t]+R_BPF_\w+.*"
    r"|(?:[0-9a-fA-F]{2}[ \t]+){7}[0-9a-fA-F]{2}[ \t]*)$")
# llvm-objdump -r: the relocation of a call ("\t\t0000000000000058:  R_BPF_64_32\t.text")
_CALL_RELOC_RE = re.compile(r"[ \t]*[0-9a-fA-F]+:[ \t]+R_BPF_64_32\b")
# "goto +2 <LBB0_2>" annotation
_ANNOT_RE = re.compile(r"[ \t]+<[^<>\s]*>[ \t]*$")
# the register state the verifier prints after "; " (R0=..., R1_w=..., fp-8=..., frame1: ...)
_STATE_RE = re.compile(r"[ \t]*(?:R\d+(?:_[a-z]+)?=|fp-?\d+=|frame\d+:)")
_NOISY = frozenset("0123456789abcdefABCDEFD")
_SPECIAL = frozenset("0123456789(D")
_HEX = frozenset("0123456789abcdefABCDEF")


class Piece(NamedTuple):
    """A statement of a line: its text, the column where it starts, and the
    opcode printed in front of it by the verifier (``(79)``), if any."""

    text: str
    col: int
    opcode: int | None = None


def _strip_comment(line: str) -> str:
    """``line`` without its comment: ``#`` at the start or after white space,
    ``//`` anywhere.  (``name#1`` is a verifier-style call, not a comment.)"""
    cut = len(line)
    i = line.find("#")
    while i >= 0:
        if i == 0 or line[i - 1] in " \t":
            cut = i
            break
        i = line.find("#", i + 1)
    j = line.find("//", 0, cut)
    if j >= 0:
        cut = j
    return line[:cut]


def split_line(line: str, semicolons: bool = True) -> list[Piece]:
    """The statements of one source line, with comments and tool decorations removed.

    ``semicolons``: split statements on ``;`` (the LLVM dialect).  A ``;``
    that starts a line is a comment in both dialects (``llvm-objdump -S``
    source lines); without ``semicolons`` a ``;`` anywhere starts a comment
    (the mnemonic dialect).  After a verifier-log prefix ``N: (xx)`` it starts the
    register-state annotation, which is dropped.
    """
    if "#" in line or "/" in line:
        line = _strip_comment(line)
    stripped = line.lstrip()
    if not stripped or stripped[0] == ";":
        return []
    first = stripped[0]
    if first not in _SPECIAL and ";" not in line and "<" not in line \
            and not (first in _NOISY and stripped[1:2] in _HEX and stripped[2:3] in (" ", "\t")) \
            and "file format" not in line:
        return [Piece(line, 1)]      # the common case: one plain statement
    start = 0
    opcode = None
    if first in _NOISY or "file format" in stripped:
        m = _SYMBOL_RE.match(line)
        if m:
            return [Piece(m.group("name") + ":", m.start("name") + 1)]
        if _NOISE_RE.match(line):
            return []
    if first.isdigit() or first == "(":
        m = _PREFIX_RE.match(line) if first.isdigit() else _OPCODE_RE.match(line)
        if m:
            start = m.end()
            op = m.group("op")
            if op is not None:
                opcode = int(op, 16)
                semi = line.find(";", start)
                if semi >= 0:
                    line = line[:semi]
            if not line[start:].strip():
                return []
    if "<" in line:
        m = _ANNOT_RE.search(line, start)
        if m:
            line = line[:m.start()]
    if ";" in line and not semicolons:
        line = line[:line.index(";", start)]
        if not line[start:].strip():
            return []
    elif ";" in line:
        out = []
        pos = start
        for part in line[start:].split(";"):
            if _STATE_RE.match(part):   # "; R1=ctx() R10=fp0": verifier state, not a statement
                break
            if part.strip():
                out.append(Piece(part, pos + 1, opcode))
            pos += len(part) + 1
        return out
    if start:
        return [Piece(line[start:], start + 1, opcode)]
    return [Piece(line, 1, opcode)]


def is_call_relocation(line: str) -> bool:
    """True if ``line`` is the relocation llvm-objdump ``-r`` prints under a
    call that waits for one (``R_BPF_64_32``): the call above it is a
    bpf-to-bpf or kfunc call (``src_reg=1``), not a helper call."""
    return _CALL_RELOC_RE.match(line) is not None


# ---------------------------------------------------------------------------
# operand values

def describe(tok: Tok | None) -> str:
    """How an error message names a token."""
    if tok is None:
        return "end of statement"
    return repr(tok.text)


def reg(tok: Tok, limit: int = 10) -> int:
    """The number of register token ``tok``; registers above ``limit`` are an error."""
    v = cast(int, tok.value)
    if v > limit:
        raise TextError(f"register {tok.text} does not exist (r0-r10)", tok.col)
    return v


def imm32(tok: Tok, negative: bool = False) -> int:
    """A 32-bit immediate as stored (signed).

    Hex (``0x...``) up to ``0xffffffff`` is taken as raw bits; decimal must be
    in ``-2**31 .. 2**31-1`` (an ALU64 immediate is sign-extended, so
    ``4294967295`` would silently mean -1: write ``-1`` or ``0xffffffff``).
    ``tok`` is a number token; ``negative``: it followed a ``-``.
    """
    v = cast(int, tok.value)
    if negative:
        if v > 1 << 31:
            raise TextError(f"immediate -{tok.text} does not fit in 32 bits (minimum -2147483648)",
                            tok.col)
        return -v
    if tok.hex:
        if v > 0xFFFFFFFF:
            raise TextError(f"immediate {tok.text} does not fit in 32 bits (maximum 0xffffffff)",
                            tok.col)
        return v - (1 << 32) if v >= 1 << 31 else v
    if v >= 1 << 31:
        raise TextError(f"immediate {tok.text} does not fit in a signed 32-bit field "
                        f"(maximum 2147483647; write it in hex to give the raw bits)", tok.col)
    return v


def off16(tok: Tok, negative: bool = False, what: str = "offset") -> int:
    """A 16-bit signed offset: hex up to ``0xffff`` (raw bits) or decimal -32768..32767.

    ``tok`` is a number token; ``negative``: it followed a ``-``; ``what``
    names the field in errors.
    """
    v = cast(int, tok.value)
    if negative:
        if v > 1 << 15:
            raise TextError(f"{what} -{tok.text} does not fit in 16 bits (minimum -32768)", tok.col)
        return -v
    if tok.hex:
        if v > 0xFFFF:
            raise TextError(f"{what} {tok.text} does not fit in 16 bits (maximum 0xffff)", tok.col)
        return v - (1 << 16) if v >= 1 << 15 else v
    if v >= 1 << 15:
        raise TextError(f"{what} {tok.text} does not fit in 16 bits (maximum 32767)", tok.col)
    return v


def rel32(tok: Tok, negative: bool = False) -> int:
    """A signed 32-bit relative target (``gotol``, local ``call``) from the
    number token ``tok`` (``negative``: it followed a ``-``)."""
    v = cast(int, tok.value)
    if negative:
        v = -v
    if not -(1 << 31) <= v < (1 << 31):
        raise TextError(f"jump offset {'-' if negative else ''}{tok.text} does not fit in 32 bits",
                        tok.col)
    return v


def imm64(tok: Tok, negative: bool = False) -> int:
    """A 64-bit constant (``ld_imm64``) as an unsigned value, from the number
    token ``tok`` (``negative``: it followed a ``-``)."""
    v = cast(int, tok.value)
    if negative:
        if v > 1 << 63:
            raise TextError(f"constant -{tok.text} does not fit in 64 bits", tok.col)
        return (-v) & 0xFFFFFFFFFFFFFFFF
    if v > 0xFFFFFFFFFFFFFFFF:
        raise TextError(f"constant {tok.text} does not fit in 64 bits", tok.col)
    return v
