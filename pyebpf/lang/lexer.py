"""The lexer of the bpftrace language: text -> tokens with bpftrace's positions.

Hand-written (one pass over the string, no ``re``): it is on the start-up
path of every ``pyebpf bt`` run, and a 100-line script lexes in well under a
millisecond this way.

It follows bpftrace 0.17's lexer, quirks included, because error positions
must match bpftrace's to the column:

- a token's span starts where the last blank (space, tab, newline) ended,
  not where the token starts: in ``$x=$y+1`` the token ``$y`` spans
  ``$x=$y``; a ``/* comment */`` does not end a span, a newline does;
- ``pid``, ``comm``, ``arg0``.. ``arg9`` are builtins, ``printf``, ``count``..
  calls, ``ustack``/``kstack`` both, ``perf``/``bpftrace`` stack modes; a
  longer word (``arg10``, ``pidx``) is an identifier;
- ``:name`` (a colon and path characters) is one ``path`` token, which is how
  attach points (``uprobe:/bin/bash:readline``) are read;
- ``/`` is the end of a predicate when the next non-blank character is ``/``
  or ``{``, else a division;
- integers: decimal, ``0x`` hex, octal (leading ``0``), ``1_000``, ``1e6``
  and the C suffixes ``u``, ``l``, ``ll``, ``ul``, ``ull``;
- strings: ``\\n \\t \\r \\" \\\\``, octal ``\\NNN`` and hex ``\\xHH`` escapes;
- ``struct X``/``union X``/``enum X`` up to ``*`` or ``)`` is one identifier
  (a cast's type), ``struct X { ... }`` a struct definition;
- ``#...`` lines are preprocessor directives, ``#!...`` at a line's start and
  ``//`` comments are skipped.

Lexical errors do not stop the lexer (bpftrace reports them and goes on):
they are collected in :attr:`Lexer.errors`.
"""
from __future__ import annotations

from .._record import Record, record
from .ast import Pos
from .errors import Diagnostic, LangError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Token", "Lexer", "tokenize", "read_uint", "parse_int", "BUILTINS", "CALLS",
           "CALL_BUILTINS", "KEYWORDS", "STACK_MODES"]

#: bpftrace 0.17's builtin variables (``arg0``..``arg9``, ``sarg0``..``sarg9`` too)
BUILTINS = frozenset(
    "args cgroup comm cpid numaid cpu ctx curtask elapsed func gid nsecs pid probe "
    "rand retval tid uid username".split()
    + ["pystack"]                                      # (pyebpf's: Python frames)
    + [f"arg{i}" for i in range(10)] + [f"sarg{i}" for i in range(10)])
#: bpftrace 0.17's function names
CALLS = frozenset(
    "avg buf cat cgroupid clear count delete exit hist join kaddr kptr ksym lhist macaddr "
    "max min ntop override print printf cgroup_path reg signal sizeof stats str strerror "
    "strftime strncmp strcontains sum system time uaddr uptr usym zero path unwatch bswap "
    "skboutput pton debugf".split())
#: both a builtin and a function
CALL_BUILTINS = frozenset({"kstack", "ustack"})
#: stack modes, the words of ``ustack(perf)``
STACK_MODES = frozenset({"bpftrace", "perf"})
#: keywords
KEYWORDS = frozenset({"if", "else", "unroll", "while", "for", "return", "continue", "break"})

# operators, longest first within each starting character
_OPERATORS = ("<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "==", "!=",
              "<=", ">=", "<<", ">>", "&&", "||", "++", "--", "->",
              ":", ";", "{", "}", "[", "]", "(", ")", ",", "=", "<", ">", "+", "-",
              "*", "/", "%", "&", "|", "^", "!", "~", ".", "?")
_OPS_BY_CHAR: dict[str, tuple[str, ...]] = {}
for _op in _OPERATORS:
    _OPS_BY_CHAR.setdefault(_op[0], ())
    _OPS_BY_CHAR[_op[0]] += (_op,)
del _op

_IDENT_START = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")
_BLANKS = frozenset(" \t\r")
_IDENT_CHARS = _IDENT_START | _DIGITS
_HEX = frozenset("0123456789abcdefABCDEF")
_PATH_CHARS = _IDENT_CHARS | frozenset("-./#*")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


@record
class Token(Record):
    """One token: ``kind`` (bpftrace's name for it: ``"integer"``,
    ``"identifier"``, ``"map"``... or the operator/keyword itself), ``value``
    (the int, the decoded string, the name), and its span as bpftrace
    computes it (see the module's notes): ``line``/``col`` to
    ``end_line``/``end_col`` (just past it)."""

    kind: str
    value: Any
    line: int
    col: int
    end_line: int
    end_col: int

    @property
    def pos(self) -> Pos:
        """The token's position (``end`` meaningful when on one line)."""
        end = self.end_col if self.end_line == self.line else self.col + 1
        return Pos(self.line, self.col, end)

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.value!r}, {self.line}:{self.col}-{self.end_col})"


def _tail_digits(text: str, i: int, chars: frozenset[str]) -> int:
    """Index past the run of ``chars`` starting at ``i``."""
    n = len(text)
    while i < n and text[i] in chars:
        i += 1
    return i


def read_uint(text: str, overflow: str = "stoull") -> int:
    """A number as bpftrace 0.17 reads integer literals and attach-point
    numbers (its ``int_parser::to_uint``): underscores dropped anywhere;
    ``0x`` hex; else with an ``e``/``E`` a scientific literal ``CeX``
    (``C`` one digit, ``X`` at most 16); else C's ``strtoull`` in base 0
    (``010`` is 8; a sign allowed: the value modulo 2**64) followed by
    nothing or a ``u``/``l``/``ll``/``ul``/``ull`` suffix.

    Raises :class:`~pyebpf.lang.errors.LangError` with bpftrace's message
    (``stoull`` for no number at all, ``overflow`` for one over 2**64 - 1,
    ``Found trailing non-numeric characters``, the scientific literal's
    complaints)."""
    n = text.replace("_", "")
    lower = n.lower()
    if lower.startswith("0x") or "e" not in lower:
        return _strtoull(n, 0, overflow)
    at = lower.index("e")
    return _scientific(n[:at], n[at + 1:])


def parse_int(text: str) -> int:
    """The value of an integer token (``1_000``, ``0x1f``, ``010`` octal,
    ``1e3``, ``5ul``; at most 2**64 - 1): :func:`read_uint`, with pyebpf's
    clearer message for a literal out of range (bpftrace says ``stoull``)."""
    return read_uint(text, f"integer literal out of range: {text}")


#: C's isspace(), which strtoull skips before a number
_C_SPACE = " \t\n\v\f\r"
#: the digits of each base strtoull reads
_BASE_DIGITS = {8: frozenset("01234567"), 10: frozenset("0123456789"),
                16: frozenset("0123456789abcdefABCDEF")}
#: the C integer suffixes bpftrace lets follow a number (any case)
_INT_SUFFIXES = frozenset({"u", "l", "ll", "ul", "ull"})
_U64_LIMIT = 1 << 64


def _scientific(coeff: str, exp: str) -> int:
    """``COEFF e EXP`` (each read in base 10), bpftrace's way."""
    try:
        c = _strtoull(coeff, 10)
    except LangError as err:
        raise LangError("Coefficient part of scientific literal is not a valid number: "
                        f"{coeff}: {err.message}") from None
    try:
        e = _strtoull(exp, 10)
    except LangError as err:
        raise LangError("Exponent part of scientific literal is not a valid number: "
                        f"{exp}: {err.message}") from None
    if c > 9:
        raise LangError(f"Coefficient part of scientific literal must be in range (0,9), "
                        f"got: {coeff}")
    if e > 16:
        raise LangError(f"Exponent will overflow integer range: {exp}")
    value: int = c * 10 ** e      # (e >= 0: an int)
    return value


def _strtoull(text: str, base: int, overflow: str = "stoull") -> int:
    """C++'s ``std::stoull(text, &idx, base)`` (base 0 or 10) with bpftrace's
    check of what follows the digits: the value modulo 2**64 (``-1`` is
    2**64 - 1); a LangError ``stoull`` when there is no number (``overflow``
    when it does not fit), ``Found trailing non-numeric characters`` after one."""
    i = len(text) - len(text.lstrip(_C_SPACE))
    negative = text[i:i + 1] == "-"
    if text[i:i + 1] in ("+", "-"):
        i += 1
    if base == 0:
        if text[i:i + 2] in ("0x", "0X") and text[i + 2:i + 3] and \
                text[i + 2] in _BASE_DIGITS[16]:
            base, i = 16, i + 2
        else:
            base = 8 if text[i:i + 1] == "0" else 10
    digits = _BASE_DIGITS[base]
    end = i
    while end < len(text) and text[end] in digits:
        end += 1
    if end == i:
        raise LangError("stoull")
    significant = text[i:end].lstrip("0")
    # (more than 22 digits is over 2**64 in any base: refused before int(),
    # which has a digit limit for decimal text)
    value = _U64_LIMIT if len(significant) > 22 else int(significant or "0", base)
    if value >= _U64_LIMIT:
        raise LangError(overflow)
    if text[end:] and text[end:].lower() not in _INT_SUFFIXES:
        raise LangError("Found trailing non-numeric characters")
    return (-value) % _U64_LIMIT if negative else value


class Lexer:
    """Turns a script into tokens (:meth:`tokens`), collecting lexical errors
    in :attr:`errors` (:class:`~pyebpf.lang.errors.Diagnostic`)."""

    def __init__(self, text: str, filename: str = "stdin") -> None:
        self.text = text
        self.filename = filename
        self.errors: list[Diagnostic] = []
        self.i = 0
        self.line = 1
        self.col = 1
        # where the current span starts (bpftrace's location "step")
        self.bline = 1
        self.bcol = 1

    # -- positions ------------------------------------------------------
    def _advance(self, n: int) -> None:
        """Consume ``n`` characters of one line."""
        self.i += n
        self.col += n

    def _newline(self) -> None:
        self.i += 1
        self.line += 1
        self.col = 1

    def _step(self) -> None:
        self.bline, self.bcol = self.line, self.col

    def _token(self, kind: str, value: Any = None) -> Token:
        return Token(kind, value, self.bline, self.bcol, self.line, self.col)

    def _error(self, message: str) -> None:
        end = self.col if self.line == self.bline else self.bcol + 1
        self.errors.append(Diagnostic(message, Pos(self.bline, self.bcol, end),
                                      end_line=self.line if self.line > self.bline else 0,
                                      filename=self.filename, source=self.text))

    # -- the scanner ----------------------------------------------------
    def tokens(self) -> list[Token]:
        """Every token, the last one ``"end of file"``."""
        out: list[Token] = []
        while True:
            tok = self._next()
            out.append(tok)
            if tok.kind == "end of file":
                return out

    def _next(self) -> Token:  # noqa: C901 - one dispatch on the first character
        text = self.text
        n = len(text)
        while True:
            i = self.i
            if i >= n:
                return self._token("end of file")
            c = text[i]
            if c in _BLANKS:
                j = _tail_digits(text, i, _BLANKS)
                self._advance(j - i)
                self._step()
                continue
            if c == "\n":
                while self.i < n and text[self.i] == "\n":
                    self._newline()
                self._step()
                continue
            if c == "#" and text.startswith("#!", i) and (i == 0 or text[i - 1] == "\n"):
                self._skip_to_eol()
                continue
            if c == "/" and text.startswith("//", i):
                self._skip_to_eol()
                continue
            if c == "/" and text.startswith("/*", i):
                self._comment()
                continue
            if c in _IDENT_START:
                return self._word()
            if c in _DIGITS:
                tok = self._number()
                if tok is not None:
                    return tok
                continue
            if c == '"':
                return self._string()
            if c == "@":
                j = _tail_digits(text, i + 1, _IDENT_CHARS) if (
                    i + 1 < n and text[i + 1] in _IDENT_START) else i + 1
                self._advance(j - i)
                return self._token("map", text[i:j])
            if c == "$":
                if i + 1 < n and text[i + 1] in _IDENT_START:
                    j = _tail_digits(text, i + 1, _IDENT_CHARS)
                    self._advance(j - i)
                    return self._token("variable", text[i:j])
                if i + 1 < n and text[i + 1] in _DIGITS:
                    j = _tail_digits(text, i + 1, _DIGITS)
                    self._advance(j - i)
                    return self._token("positional parameter", text[i:j])
                if text.startswith("$#", i):
                    self._advance(2)
                    return self._token("$#")
            if c == ":" and i + 1 < n and (text[i + 1] in _PATH_CHARS or text[i + 1] == "\\"):
                return self._path()
            if c == "#" and not text.startswith("#!", i):
                start = i
                self._skip_to_eol()
                return self._token("preprocessor directive", text[start:self.i])
            if c == "/" and self._ends_predicate(i + 1):
                self._advance(1)
                return self._token("end predicate")
            for op in _OPS_BY_CHAR.get(c, ()):
                if text.startswith(op, i):
                    self._advance(len(op))
                    return self._token(op)
            self._advance(1)
            self._error(f"invalid character '{c}'")

    def _skip_to_eol(self) -> None:
        j = self.text.find("\n", self.i)
        if j < 0:
            j = len(self.text)
        self._advance(j - self.i)

    def _comment(self) -> None:
        text = self.text
        self._advance(2)
        while True:
            if self.i >= len(text):
                self._error("end of file during comment")
                return
            if text.startswith("*/", self.i):
                self._advance(2)
                return
            if text[self.i] == "\n":
                self._newline()
                self._step()
            else:
                self._advance(1)

    def _ends_predicate(self, j: int) -> bool:
        """bpftrace's rule: ``/`` followed by blanks then ``/`` or ``{``."""
        text = self.text
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        return j < len(text) and text[j] in "/{"

    def _word(self) -> Token:
        text = self.text
        i = self.i
        j = _tail_digits(text, i, _IDENT_CHARS)
        word = text[i:j]
        self._advance(j - i)
        if word in STACK_MODES:
            return self._token("stack_mode", word)
        if word in BUILTINS:
            return self._token("builtin", word)
        if word in CALLS:
            return self._token("call", word)
        if word in CALL_BUILTINS:
            return self._token("call_builtin", word)
        if word in ("struct", "union", "enum"):
            return self._struct(word)
        if word in KEYWORDS:
            return self._token(word)
        return self._token("identifier", word)

    def _number(self) -> Token | None:
        text = self.text
        i = self.i
        if text[i] == "0" and text[i + 1:i + 2] in ("x", "X") and text[i + 2:i + 3] in _HEX \
                and text[i + 2:i + 3]:
            j = _tail_digits(text, i + 2, _HEX)
        else:
            j = self._int_end(i)
            if j < len(text) and text[j] in "eE" and j + 1 < len(text) \
                    and text[j + 1] in _DIGITS:
                j = self._int_end(j + 1)
        word = text[i:j]
        self._advance(j - i)
        try:
            return self._token("integer", parse_int(word))
        except LangError as e:
            self._error(e.message)
            return None

    def _int_end(self, i: int) -> int:
        """End of ``[0-9]([0-9_]*[0-9])?`` plus a C suffix, from ``i``."""
        text = self.text
        j = _tail_digits(text, i, _DIGITS | frozenset("_"))
        while j > i + 1 and text[j - 1] == "_":
            j -= 1
        k = j
        if k < len(text) and text[k] in "uU":
            k += 1
        for _ in range(2):
            if k < len(text) and text[k] in "lL":
                k += 1
        return k

    def _path(self) -> Token:
        text = self.text
        i = self.i
        j = i + 1
        while j < len(text):
            if text[j] == "\\" and j + 1 < len(text) and text[j + 1] != "\n":
                j += 2
            elif text[j] in _PATH_CHARS:
                j += 1
            else:
                break
        if j == i + 1:   # a lone backslash: just the colon
            self._advance(1)
            return self._token(":")
        self._advance(j - i)
        return self._token("path", text[i:j])

    def _string(self) -> Token:
        text = self.text
        n = len(text)
        self._advance(1)
        buf: list[str] = []
        while True:
            i = self.i
            if i >= n:
                self._error("unterminated string")
                return self._token("string", "".join(buf))
            c = text[i]
            if c == '"':
                self._advance(1)
                return self._token("string", "".join(buf))
            if c == "\n":
                self._error("unterminated string")
                self._newline()
                self._step()
                return self._next()
            if c != "\\":
                j = i
                while j < n and text[j] not in '\\\n"':
                    j += 1
                buf.append(text[i:j])
                self._advance(j - i)
                continue
            self._escape(buf)

    def _escape(self, buf: list[str]) -> None:
        text = self.text
        i = self.i
        nxt = text[i + 1:i + 2]
        if nxt in _SIMPLE_ESCAPES and nxt:
            buf.append(_SIMPLE_ESCAPES[nxt])
            self._advance(2)
        elif nxt and nxt in "01234567":
            j = i + 1
            while j < min(i + 4, len(text)) and text[j] in "01234567":
                j += 1
            self._advance(j - i)
            value = int(text[i + 1:j], 8)
            if value > 255:
                self._error(f"octal escape sequence out of range '{text[i:j]}'")
            buf.append(chr(value & 0xff))
        elif nxt in ("x", "X") and text[i + 2:i + 3] in _HEX and text[i + 2:i + 3]:
            j = i + 2
            while j < min(i + 4, len(text)) and text[j] in _HEX:
                j += 1
            buf.append(chr(int(text[i + 2:j], 16)))
            self._advance(j - i)
        elif nxt == "" or nxt == "\n":
            self._advance(1)
            buf.append("\\")
        else:
            self._advance(2)
            self._error(f"invalid escape character '\\{nxt}'")

    def _struct(self, word: str) -> Token:
        """After ``struct``/``union``/``enum``: a cast's type name (up to
        ``*`` or ``)``, not consumed) or a whole definition ``{ ... }``."""
        text = self.text
        buf: list[str] = []
        while self.i < len(text):
            c = text[self.i]
            if c in "*)":
                return self._token("identifier", f"{word} {''.join(buf).strip()}")
            if c == "{":
                return self._definition(word, buf)
            if c == "\n":
                buf.append(c)
                self._newline()
                self._step()
            else:
                buf.append(c)
                self._advance(1)
        return self._token("identifier", f"{word} {''.join(buf).strip()}")

    def _definition(self, word: str, buf: list[str]) -> Token:
        text = self.text
        depth = 0
        while self.i < len(text):
            c = text[self.i]
            if c == "\n":
                buf.append(c)
                self._newline()
                self._step()
                continue
            buf.append(c)
            self._advance(1)
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    if text.startswith(";", self.i):
                        buf.append(";")
                        self._advance(1)
                    return self._token("struct definition", word + "".join(buf))
        return self._token("struct definition", word + "".join(buf))


def tokenize(text: str, filename: str = "stdin") -> tuple[list[Token], list[Diagnostic]]:
    """The tokens of ``text`` and the lexical errors found on the way."""
    lx = Lexer(text, filename)
    toks = lx.tokens()
    return toks, lx.errors
