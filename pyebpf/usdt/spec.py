"""USDT argument specs: ``-4@8(%rdi)``, ``8@[x0, 16]``, ``-8@$-2``... decoded.

sys/sdt.h writes each probe argument as ``[-]SIZE[f]@OPERAND``: the size in
bytes (negative when the C type is signed, ``f`` for floating point) and the
operand exactly as the compiler printed it in the target's assembler syntax.
This module turns one such token into an immutable :class:`ArgSpec`, for
every form gcc and clang emit on x86_64 (AT&T syntax, every sub-register,
SIB with or without base, rip-relative with symbols and addends, GOTPCREL,
xmm registers, segment prefixes), i386/x32, aarch64, arm, riscv32/64,
s390/s390x and ppc/ppc64.

API
    :func:`parse_arg` one token -> :class:`ArgSpec` (raises
    :class:`~pyebpf.errors.UsdtSpecError`);
    :func:`parse_args` a note's whole argument string -> tuple of
    :class:`ArgSpec` or :class:`UndecodableArg` (never raises, never shifts:
    argument *i* of the tuple is argument *i* of the probe);
    :func:`split_args` the string -> tokens;
    :meth:`ArgSpec.format` the canonical text (``parse_arg(s.format(), s.arch) == s``).

The parser is pure Python, has no side effects and caches by (token, arch),
so the thousands of ``8@%rax`` of a big binary are parsed once.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import UsdtSpecError

__all__ = ["ArgKind", "ArgSpec", "UndecodableArg", "parse_arg", "parse_args", "split_args",
           "SUPPORTED_ARCHES", "expected_forms", "canonical_arch"]


class ArgKind(str, enum.Enum):
    """Where an argument's value lives.  Addresses below use the record's
    fields: ``reg``, ``index``, ``scale``, ``offset``, ``symbol``."""

    CONST = "const"            #: an immediate: ``-4@$-5``, ``4@#8``, ``8@i3`` -> ``imm``
    ADDRESS = "address"        #: the address of a symbol: ``8@$g_item+8`` (= &sym + offset)
    REG = "reg"                #: in a register: ``-4@%edi``, ``8@x0``, ``8f@%xmm1``
    DEREF = "deref"            #: memory at reg + offset: ``8@-8(%rbp)``, ``4@[sp, 12]``, ``8@16(a0)``
    SIB = "sib"                #: memory at [reg] + index*scale + offset: ``-8@80(%rsp,%rax,8)``, ``(,%rdi,4)``
    RIP = "rip"                #: memory at a pc-relative address: ``-4@g_counter(%rip)``, ``8@16(%rip)``
    SYM_REG = "sym_reg"        #: memory at &sym + offset + reg: ``1@g_bytes(%rsi)``
    SYM_INDEX = "sym_index"    #: memory at &sym + offset + [reg] + index*scale: ``-4@g_table(,%rdi,4)``
    ABSOLUTE = "absolute"      #: memory at an absolute address: ``4@g_counter`` (i386), ``4@1234``
    GOTPCREL = "gotpcrel"      #: the GOT slot of sym (its address): ``8@g_item@GOTPCREL(%rip)``

    def __str__(self) -> str:
        return self.value


_MEMORY_KINDS = frozenset({ArgKind.DEREF, ArgKind.SIB, ArgKind.RIP, ArgKind.SYM_REG,
                           ArgKind.SYM_INDEX, ArgKind.ABSOLUTE, ArgKind.GOTPCREL})


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One decoded argument.  Immutable and hashable; equal records mean the
    same argument location (the original ``text`` is kept but not compared).

    Attributes:
        arch: the architecture the spec was read for (``x86_64``, ``aarch64``...).
        kind: an :class:`ArgKind`.
        size: the value's size in bytes: 1, 2, 4 or 8.
        signed: the C type is signed (the size was written negative).
        is_float: the C type is ``float``/``double`` (``f`` after the size).
        reg: the register, normalised to the full register (``%edi`` -> ``rdi``,
            ``w3`` -> ``x3``, ``fp`` -> ``x29``...); the base register of memory
            forms; ``rip``/``pc`` for pc-relative forms; None if there is none.
        reg_width: the width in bytes of the register as written (4 for
            ``%edi``, 1 for ``%dil`` and ``%ah``, 16 for ``%xmm1``).
        reg_shift: the bit position of that sub-register in the full register
            (8 for ``%ah``/``%bh``/``%ch``/``%dh``, else 0).
        offset: the displacement (memory forms) or addend (symbol forms).
        index: the index register of SIB forms (normalised), else None.
        index_width: the width of the index register as written.
        scale: the index scale (1, 2, 4, 8); 1 when there is no index.
        symbol: the symbol of RIP/SYM_*/ABSOLUTE/ADDRESS/GOTPCREL forms.
        reloc: a relocation operator on the symbol (``GOTPCREL``, ``GOTOFF``,
            ``TPOFF``, ``lo12``...), else None.
        segment: an x86 segment override (``fs``, ``gs``), else None.
        imm: the constant exactly as written (CONST only).  Compilers print
            unsigned constants as signed (``2@$-15536`` is 50000): :attr:`value`
            gives it as the size and sign say.
        size_given: False for the size-less forms BCC accepts (``%rdi``); the
            size is then the register width or the word size, unsigned.
        text: the token as written (not compared).
    """

    arch: str
    kind: ArgKind
    size: int
    signed: bool = False
    is_float: bool = False
    reg: str | None = None
    reg_width: int | None = None
    reg_shift: int = 0
    offset: int = 0
    index: str | None = None
    index_width: int | None = None
    scale: int = 1
    symbol: str | None = None
    reloc: str | None = None
    segment: str | None = None
    imm: int | None = None
    size_given: bool = True
    text: str = field(default="", compare=False)

    #: True: this is a decoded argument (:class:`UndecodableArg` has False).
    decodable = True

    # -- derived views -------------------------------------------------
    @property
    def value(self) -> int | None:
        """For CONST: the constant as the argument's C type holds it
        (``imm`` truncated to ``size`` bytes, sign-extended if ``signed``)."""
        if self.imm is None:
            return None
        bits = 8 * self.size
        v = self.imm & ((1 << bits) - 1)
        if self.signed and v >> (bits - 1):
            v -= 1 << bits
        return v

    @property
    def reads_memory(self) -> bool:
        """The value must be read from the traced process's memory."""
        return self.kind in _MEMORY_KINDS

    @property
    def needs_symbol(self) -> bool:
        """The location involves a symbol that must be resolved (to an
        address) before the value can be read."""
        return self.symbol is not None

    @property
    def ctype(self) -> str:
        """A short type name: ``s8``..``s64``, ``u8``..``u64``, ``f32``, ``f64``."""
        if self.is_float:
            return f"f{8 * self.size}"
        return f"{'s' if self.signed else 'u'}{8 * self.size}"

    def check(self) -> "ArgSpec":
        """Return self (an :class:`UndecodableArg` raises its error here)."""
        return self

    def format(self) -> str:
        """The canonical text of this spec; parsing it gives an equal record."""
        return _FORMATTERS[_family(self.arch)](self)

    def __str__(self) -> str:
        return self.text or self.format()

    def describe(self) -> str:
        """A human description: ``s32 in edi (low 32 bits of rdi)``,
        ``u64 at [rsp + 8]``, ``s32 at [&g_table + rdi*4]``, ``s64 = -2``."""
        t = self.ctype
        k = self.kind
        if k is ArgKind.CONST:
            return f"{t} = {self.value}" + (f" (written {self.imm})" if self.value != self.imm else "")
        if k is ArgKind.ADDRESS:
            return f"{t} = &{self.symbol}{_signed_addend(self.offset)}"
        if k is ArgKind.REG:
            written = _reg_written(self)
            if written != self.reg:
                if self.reg_shift:
                    part = f"bits {self.reg_shift}-{self.reg_shift + 8 * (self.reg_width or 0) - 1}"
                else:
                    part = f"low {8 * (self.reg_width or 0)} bits"
                return f"{t} in {written} ({part} of {self.reg})"
            return f"{t} in {self.reg}"
        terms = []
        if self.segment:
            terms.append(f"{self.segment}_base")
        if k is ArgKind.GOTPCREL:
            return f"{t} = GOT slot of {self.symbol} (its address){_signed_addend(self.offset)}"
        if self.symbol:
            sym = f"&{self.symbol}"
            if self.reloc:
                sym = f"{self.reloc}({self.symbol})"
            terms.append(sym)
        if k is ArgKind.RIP:
            if not self.symbol:   # numeric off(%rip): relative to the pc
                terms.append("pc")
        elif self.reg:
            terms.append(self.reg)
        if self.index:
            terms.append(self.index + (f"*{self.scale}" if self.scale != 1 else ""))
        expr = " + ".join(terms)
        if self.offset or not expr:
            expr = f"{expr}{_signed_addend(self.offset)}" if expr else f"{self.offset:#x}"
        tail = " (pc-relative)" if k is ArgKind.RIP and self.symbol else ""
        return f"{t} at [{expr}]{tail}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (plus ``value`` and ``ctype``)."""
        return {
            "text": self.text or self.format(), "kind": self.kind.value, "size": self.size,
            "signed": self.signed, "float": self.is_float, "ctype": self.ctype,
            "reg": self.reg, "reg_width": self.reg_width, "reg_shift": self.reg_shift,
            "offset": self.offset, "index": self.index, "index_width": self.index_width,
            "scale": self.scale, "symbol": self.symbol, "reloc": self.reloc,
            "segment": self.segment, "imm": self.imm, "value": self.value,
            "size_given": self.size_given,
        }


_ARGSPEC_FIELDS = frozenset(ArgSpec.__dataclass_fields__) | {
    "value", "reads_memory", "needs_symbol", "ctype", "format", "describe", "to_dict"}


@dataclass(frozen=True, slots=True)
class UndecodableArg:
    """An argument whose spec could not be decoded.

    It holds its place in :attr:`UsdtNote.arguments` so the other arguments
    keep their indices.  It raises its :class:`~pyebpf.errors.UsdtSpecError`
    when used: :meth:`check`, or reading any :class:`ArgSpec` attribute
    (``arg.kind``, ``arg.size``...).  ``decodable`` is False.
    """

    text: str
    error: UsdtSpecError = field(compare=False)
    index: int | None = None

    decodable = False

    def check(self) -> ArgSpec:
        """Raise the decoding error."""
        raise self.error

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the text, ``kind`` None and the error."""
        return {"text": self.text, "kind": None, "error": str(self.error)}

    def __str__(self) -> str:
        return self.text

    def describe(self) -> str:
        """``undecodable: <reason>``."""
        return f"undecodable: {self.error.reason}"

    def __getattr__(self, name: str) -> Any:
        # only called for attributes the dataclass does not have
        if name in _ARGSPEC_FIELDS:
            raise object.__getattribute__(self, "error")
        raise AttributeError(name)


# ---------------------------------------------------------------------------
# architectures

#: architecture names the decoder accepts (``canonical_arch`` maps aliases).
SUPPORTED_ARCHES = ("x86_64", "x32", "i386", "aarch64", "aarch64_ilp32", "arm", "riscv64",
                    "riscv32", "s390x", "s390", "ppc64", "ppc64le", "ppc")

_ARCH_ALIASES = {
    "amd64": "x86_64", "x86-64": "x86_64", "x64": "x86_64", "i686": "i386", "i586": "i386",
    "i486": "i386", "x86": "i386", "ia32": "i386", "arm64": "aarch64", "armv7l": "arm",
    "armv6l": "arm", "armhf": "arm", "armel": "arm", "powerpc64": "ppc64",
    "powerpc64le": "ppc64le", "powerpc": "ppc", "aarch64_be": "aarch64",
}

_FAMILY = {"x86_64": "x86", "x32": "x86", "i386": "x86", "aarch64": "aarch64",
           "aarch64_ilp32": "aarch64", "arm": "arm", "riscv64": "riscv", "riscv32": "riscv",
           "s390x": "s390", "s390": "s390", "ppc64": "ppc", "ppc64le": "ppc", "ppc": "ppc"}

_WORD = {"x86_64": 8, "x32": 8, "i386": 4, "aarch64": 8, "aarch64_ilp32": 8, "arm": 4,
         "riscv64": 8, "riscv32": 4, "s390x": 8, "s390": 4, "ppc64": 8, "ppc64le": 8, "ppc": 4}

_EXPECTED = {
    "x86": ("N@%reg, N@$imm, N@off(%reg), N@(%reg), N@off(%base,%index,scale), "
            "N@(,%index,scale), N@sym(%rip), N@sym+off(%rip), N@off+sym(%rip), "
            "N@sym(%reg), N@sym(,%index,scale), N@sym@GOTPCREL(%rip), Nf@%xmmN "
            "(N = [-]1, 2, 4 or 8)"),
    "aarch64": ("N@xN, N@wN, N@sp, N@imm, N@#imm, N@[reg], N@[reg, off], N@[reg, #off], "
                "N@[reg, reg], N@[reg, reg, lsl #s], N@[reg, #:lo12:sym], Nf@vN/dN/sN "
                "(N = [-]1, 2, 4 or 8)"),
    "arm": ("N@rN, N@#imm, N@[reg], N@[reg, #off], N@[reg, reg], N@[reg, reg, lsl #s] "
            "(registers r0-r15, fp, ip, sp, lr, pc; N = [-]1, 2, 4 or 8)"),
    "riscv": ("N@reg, N@imm, N@off(reg), N@(reg) (ABI names a0, sp, s0... or x0-x31; "
              "N = [-]1, 2, 4 or 8)"),
    "s390": "N@%rN, N@imm, N@off(%rN), N@off(%rX,%rB) (N = [-]1, 2, 4 or 8)",
    "ppc": ("N@%rN, N@N (register), N@iIMM, N@off(%rN), N@off(N) "
            "(N = [-]1, 2, 4 or 8)"),
}


def canonical_arch(arch: str) -> str:
    """``amd64`` -> ``x86_64``, ``arm64`` -> ``aarch64``...; raises
    :class:`~pyebpf.errors.UsdtSpecError` for an architecture with no decoder."""
    a = _ARCH_ALIASES.get(arch, arch)
    if a not in _FAMILY:
        raise UsdtSpecError(f"no USDT argument decoder for architecture {arch!r}", arch=arch,
                            expected="one of " + ", ".join(SUPPORTED_ARCHES))
    return a


def _family(arch: str) -> str:
    return _FAMILY[arch]


def expected_forms(arch: str) -> str:
    """The spec forms :func:`parse_arg` accepts for ``arch``, as text."""
    return _EXPECTED[_family(canonical_arch(arch))]


class _Fail(Exception):
    """Internal: a decoding failure; turned into UsdtSpecError by parse_arg."""


# ---------------------------------------------------------------------------
# numbers, symbols and the size prefix

_INT_RE = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)\Z")
_SIZE_RE = re.compile(r"(-?)(\d+)(f?)@")
_SYM_RE = re.compile(r"[A-Za-z_.][\w.$]*")
_RELOC_RE = re.compile(r"@([A-Za-z][A-Za-z0-9_]*)")
_NUM_RE = re.compile(r"(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)")
_U64 = 1 << 64
_S64_MIN = -(1 << 63)


def _int(text: str, what: str = "number") -> int:
    """A gas integer literal: decimal, 0x hex, 0b binary or 0-prefixed octal."""
    t = text.strip()
    if not _INT_RE.match(t):
        raise _Fail(f"{what} {text!r} is not an integer")
    sign = -1 if t[0] == "-" else 1
    body = t.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        v = int(body[2:], 16)
    elif body[:2] in ("0b", "0B"):
        v = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        v = int(body[1:], 8)
    else:
        v = int(body)
    v *= sign
    if not _S64_MIN <= v < _U64:
        raise _Fail(f"{what} {text!r} does not fit in 64 bits")
    return v


def _split_size(text: str, arch: str) -> tuple[int, bool, bool, bool, str]:
    """``-4@...`` -> (size, signed, float, size_given, operand)."""
    m = _SIZE_RE.match(text)
    if m is None:
        if "@" in text.split("(")[0].split("[")[0] and not _RELOC_RE.search(text):
            raise _Fail("the size before '@' must be [-]1, 2, 4 or 8, optionally followed by 'f'")
        return 0, False, False, False, text
    sign, digits, fl = m.groups()
    size = int(digits)
    if size not in (1, 2, 4, 8):
        raise _Fail(f"unsupported size {sign}{digits}: must be [-]1, 2, 4 or 8")
    if fl and size not in (2, 4, 8):
        raise _Fail(f"unsupported floating-point size {digits}: must be 2, 4 or 8")
    body = text[m.end():]
    if not body:
        raise _Fail("nothing after '@'")
    return size, sign == "-", bool(fl), True, body


def _expr(text: str, allow_empty: bool = False) -> tuple[str | None, str | None, int]:
    """A displacement expression: numbers and at most one symbol joined by
    ``+``/``-`` (``16+g_item``, ``g_item+16``, ``sym-8``, ``sym@GOTPCREL``,
    ``-72``).  Returns (symbol, reloc, offset)."""
    s = text.strip()
    if not s:
        if allow_empty:
            return None, None, 0
        raise _Fail("empty displacement")
    symbol = reloc = None
    total = 0
    pos = 0
    n = len(s)
    sign = 1
    first = True
    while pos < n:
        c = s[pos]
        if c in "+-":
            sign = -1 if c == "-" else 1
            pos += 1
            while pos < n and s[pos] == " ":
                pos += 1
        elif not first:
            raise _Fail(f"expected '+' or '-' at {s[pos:]!r} in {s!r}")
        if pos >= n:
            raise _Fail(f"dangling operator in {s!r}")
        m = _SYM_RE.match(s, pos)
        if m and not s[pos].isdigit():
            if symbol is not None:
                raise _Fail(f"two symbols in {s!r}")
            if sign < 0:
                raise _Fail(f"negated symbol in {s!r}")
            symbol = m.group(0)
            pos = m.end()
            r = _RELOC_RE.match(s, pos)
            if r:
                reloc = r.group(1)
                reloc = reloc.upper() if reloc.upper() in _X86_RELOCS else reloc
                pos = r.end()
        else:
            m = _NUM_RE.match(s, pos)
            if not m:
                raise _Fail(f"cannot read {s[pos:]!r} in {s!r}")
            total += sign * _int(m.group(0))
            pos = m.end()
        while pos < n and s[pos] == " ":
            pos += 1
        sign = 1
        first = False
    if not _S64_MIN <= total < _U64:
        raise _Fail(f"offset in {s!r} does not fit in 64 bits")
    return symbol, reloc, total


def _fmt_disp(symbol: str | None, reloc: str | None, offset: int, always: bool) -> str:
    if symbol is None:
        return str(offset) if (offset or always) else ""
    s = symbol + (f"@{reloc}" if reloc else "")
    return s + _signed_addend(offset).replace(" ", "")


def _signed_addend(offset: int) -> str:
    if not offset:
        return ""
    return f" + {offset}" if offset > 0 else f" - {-offset}"


# ---------------------------------------------------------------------------
# x86 (AT&T syntax)

_X86_RELOCS = {"GOTPCREL", "GOTOFF", "GOT", "PLT", "TPOFF", "NTPOFF", "DTPOFF", "GOTTPOFF",
               "GOTNTPOFF", "INDNTPOFF", "TLSGD", "TLSLD", "TLSLDM", "GOTPLT", "PLTOFF",
               "GOTPCRELX", "SIZE"}


_RegTable = dict[str, tuple[str, int, int]]        # name -> (full register, width, shift)
_RegNames = dict[tuple[str, int, int], str]        # the reverse, to canonical names


def _x86_tables() -> tuple[_RegTable, _RegTable, _RegNames, _RegNames]:
    """Register name -> (full register, width, shift), for 64- and 32-bit mode,
    and the reverse maps (full, width, shift) -> canonical name."""
    r64: dict[str, tuple[str, int, int]] = {}
    for x in "abcd":
        full = f"r{x}x"
        r64.update({full: (full, 8, 0), f"e{x}x": (full, 4, 0), f"{x}x": (full, 2, 0),
                    f"{x}l": (full, 1, 0), f"{x}h": (full, 1, 8)})
    for base in ("si", "di", "bp", "sp"):
        full = f"r{base}"
        r64.update({full: (full, 8, 0), f"e{base}": (full, 4, 0), base: (full, 2, 0),
                    f"{base}l": (full, 1, 0)})
    for i in range(8, 16):
        full = f"r{i}"
        r64.update({full: (full, 8, 0), f"r{i}d": (full, 4, 0), f"r{i}w": (full, 2, 0),
                    f"r{i}b": (full, 1, 0)})
    r64.update({"rip": ("rip", 8, 0), "eip": ("rip", 4, 0)})
    for i in range(32):
        r64[f"xmm{i}"] = (f"xmm{i}", 16, 0)
    r32: dict[str, tuple[str, int, int]] = {}
    for x in "abcd":
        full = f"e{x}x"
        r32.update({full: (full, 4, 0), f"{x}x": (full, 2, 0), f"{x}l": (full, 1, 0),
                    f"{x}h": (full, 1, 8)})
    for base in ("si", "di", "bp", "sp"):
        full = f"e{base}"
        r32.update({full: (full, 4, 0), base: (full, 2, 0)})
    r32["eip"] = ("eip", 4, 0)
    for i in range(8):
        r32[f"xmm{i}"] = (f"xmm{i}", 16, 0)
    rev64 = {v: k for k, v in reversed(list(r64.items()))}
    rev32 = {v: k for k, v in reversed(list(r32.items()))}
    # aliases accepted on input only
    for i in range(8, 16):
        r64[f"r{i}l"] = (f"r{i}", 1, 0)
    return r64, r32, rev64, rev32


_X86_R64, _X86_R32, _X86_REV64, _X86_REV32 = _x86_tables()
_X86_SEGMENTS = ("cs", "ds", "es", "fs", "gs", "ss")


def _x86_regs(arch: str) -> tuple[_RegTable, _RegNames]:
    return (_X86_R32, _X86_REV32) if arch == "i386" else (_X86_R64, _X86_REV64)


def _x86_reg(text: str, arch: str) -> tuple[str, int, int]:
    t = text.strip()
    if not t.startswith("%"):
        raise _Fail(f"expected a register (%name), got {t!r}")
    name = t[1:].lower()
    table, _ = _x86_regs(arch)
    try:
        return table[name]
    except KeyError:
        raise _Fail(f"unknown {arch} register %{t[1:]}") from None


def _x86_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
               arch: str) -> ArgSpec:
    word = _WORD[arch]
    s = body.strip()
    segment = None
    m = re.match(r"%([a-zA-Z]s)\s*:", s)
    if m and m.group(1).lower() in _X86_SEGMENTS:
        segment = m.group(1).lower()
        s = s[m.end():].strip()
    if s.startswith("$"):
        if segment:
            raise _Fail("a segment override on an immediate")
        symbol, reloc, off = _expr(s[1:])
        if symbol is None:
            return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float, imm=off,
                           size_given=size_given)
        return ArgSpec(arch, ArgKind.ADDRESS, size or word, signed, is_float, offset=off,
                       symbol=symbol, reloc=reloc, size_given=size_given)
    if s.startswith("%") and "(" not in s:
        if segment:
            raise _Fail("a segment override on a register")
        reg, width, shift = _x86_reg(s, arch)
        if not size:
            size = min(width, 8)
        return ArgSpec(arch, ArgKind.REG, size, signed, is_float, reg=reg, reg_width=width,
                       reg_shift=shift, size_given=size_given)
    size = size or word
    if "(" not in s:
        if ")" in s:
            raise _Fail("')' without '('")
        symbol, reloc, off = _expr(s)
        return ArgSpec(arch, ArgKind.ABSOLUTE, size, signed, is_float, offset=off,
                       symbol=symbol, reloc=reloc, segment=segment, size_given=size_given)
    disp, _, rest = s.partition("(")
    if not rest.endswith(")"):
        raise _Fail("memory operand must end with ')'")
    inner = rest[:-1]
    if "(" in inner or ")" in inner:
        raise _Fail("nested parentheses")
    symbol, reloc, off = _expr(disp, allow_empty=True)
    parts = [p.strip() for p in inner.split(",")]
    if len(parts) > 3:
        raise _Fail("more than three parts in (base,index,scale)")
    base = index = None
    bw = iw = None
    scale = 1
    if parts[0]:
        base, bw, bshift = _x86_reg(parts[0], arch)
        if bshift or (bw is not None and bw < 4):
            raise _Fail(f"{parts[0]} cannot be a base register")
        if base.startswith("xmm"):
            raise _Fail(f"{parts[0]} cannot be a base register")
    elif len(parts) == 1:
        raise _Fail("empty parentheses")
    if len(parts) >= 2:
        if not parts[1]:
            raise _Fail("empty index register")
        index, iw, ishift = _x86_reg(parts[1], arch)
        if ishift or iw < 4 or index.startswith("xmm") or index in ("rip", "eip"):
            raise _Fail(f"{parts[1]} cannot be an index register")
        if index in ("rsp", "esp"):
            raise _Fail("%rsp cannot be an index register")
        if len(parts) == 3:
            scale = _int(parts[2], "scale") if parts[2] else 1
            if scale not in (1, 2, 4, 8):
                raise _Fail(f"scale must be 1, 2, 4 or 8, got {parts[2]}")
    if base in ("rip", "eip"):
        if index is not None:
            raise _Fail("%rip cannot be used with an index register")
        kind = ArgKind.GOTPCREL if reloc == "GOTPCREL" else ArgKind.RIP
    elif symbol is None:
        kind = ArgKind.SIB if index is not None else ArgKind.DEREF
    else:
        kind = ArgKind.SYM_INDEX if index is not None else ArgKind.SYM_REG
    return ArgSpec(arch, kind, size, signed, is_float, reg=base, reg_width=bw, offset=off,
                   index=index, index_width=iw, scale=scale, symbol=symbol, reloc=reloc,
                   segment=segment, size_given=size_given)


def _x86_regname(reg: str, width: int | None, shift: int, arch: str) -> str:
    _, rev = _x86_regs(arch)
    return rev[(reg, width, shift)]  # type: ignore[index]  # width None: KeyError, as meant


def _x86_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = f"${a.imm}"
    elif k is ArgKind.ADDRESS:
        op = "$" + _fmt_disp(a.symbol, a.reloc, a.offset, True)
    elif k is ArgKind.REG:
        op = "%" + _x86_regname(a.reg or "", a.reg_width, a.reg_shift, a.arch)
    else:
        seg = f"%{a.segment}:" if a.segment else ""
        if k is ArgKind.ABSOLUTE:
            op = seg + _fmt_disp(a.symbol, a.reloc, a.offset, True)
        else:
            parts = "%" + _x86_regname(a.reg, a.reg_width, 0, a.arch) if a.reg else ""
            if a.index:
                parts += ",%" + _x86_regname(a.index, a.index_width, 0, a.arch)
                if a.scale != 1:
                    parts += f",{a.scale}"
            op = seg + _fmt_disp(a.symbol, a.reloc, a.offset, False) + f"({parts})"
    return _size_prefix(a) + op


def _size_prefix(a: ArgSpec) -> str:
    if not a.size_given:
        return ""
    return f"{'-' if a.signed else ''}{a.size}{'f' if a.is_float else ''}@"


def _reg_written(a: ArgSpec) -> str | None:
    if a.reg is None:
        return None
    fam = _family(a.arch)
    if fam == "x86":
        return _x86_regname(a.reg, a.reg_width, a.reg_shift, a.arch)
    if fam == "aarch64":
        return _a64_regname(a.reg or '', a.reg_width)
    return a.reg


# ---------------------------------------------------------------------------
# aarch64

def _a64_reg(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"([xwvqdshb])(\d{1,2})", t)
    if m:
        p, n = m.group(1), int(m.group(2))
        if p in "xw":
            if n <= 30:
                return f"x{n}", 8 if p == "x" else 4
            if n == 31:      # BCC's reading: x31 as a base is sp
                return "sp", 8 if p == "x" else 4
        elif n <= 31:
            return f"v{n}", {"v": 16, "q": 16, "d": 8, "s": 4, "h": 2, "b": 1}[p]
        raise _Fail(f"unknown aarch64 register {text.strip()!r}")
    if t in ("sp", "wsp"):
        return "sp", 8 if t == "sp" else 4
    if t in ("xzr", "wzr"):
        return "xzr", 8 if t == "xzr" else 4
    if t == "fp":
        return "x29", 8
    if t == "lr":
        return "x30", 8
    raise _Fail(f"unknown aarch64 register {text.strip()!r}")


def _a64_regname(reg: str, width: int | None) -> str:
    if reg == "sp":
        return "sp" if width == 8 else "wsp"
    if reg == "xzr":
        return "xzr" if width == 8 else "wzr"
    if reg.startswith("x"):
        return reg if width == 8 else "w" + reg[1:]
    prefix = {16: "v", 8: "d", 4: "s", 2: "h", 1: "b"}[width or 16]
    return prefix + reg[1:]


def _bracket_parts(s: str) -> list[str]:
    if not (s.startswith("[") and s.endswith("]")):
        raise _Fail("memory operand must be [reg] or [reg, off]")
    inner = s[1:-1]
    if "[" in inner or "]" in inner:
        raise _Fail("nested brackets")
    parts = [p.strip() for p in inner.split(",")]
    if not parts[0]:
        raise _Fail("missing base register")
    return parts


def _shift_scale(text: str) -> int:
    m = re.fullmatch(r"lsl\s*#?\s*(\d+)", text.strip(), re.I)
    if not m:
        raise _Fail(f"expected 'lsl #N' after the index register, got {text!r}")
    sh = int(m.group(1))
    if sh > 3:
        raise _Fail(f"index shift {sh} out of range 0-3")
    return 1 << sh


def _a64_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
               arch: str) -> ArgSpec:
    s = body.strip()
    if s.startswith("["):
        parts = _bracket_parts(s)
        base, bw = _a64_reg(parts[0])
        if not base.startswith("x") and base != "sp":
            raise _Fail(f"{parts[0]} cannot be a base register")
        size = size or 8
        if len(parts) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=bw,
                           size_given=size_given)
        second = parts[1]
        if len(parts) == 2 and second.startswith("#:"):
            m = re.fullmatch(r"#:([a-z0-9_]+):(.+)", second, re.I)
            if not m:
                raise _Fail(f"cannot read relocation {second!r}")
            symbol, reloc2, off = _expr(m.group(2))
            if symbol is None or reloc2:
                raise _Fail(f"expected a symbol after #:{m.group(1)}:")
            return ArgSpec(arch, ArgKind.SYM_REG, size, signed, is_float, reg=base,
                           reg_width=bw, offset=off, symbol=symbol, reloc=m.group(1).lower(),
                           size_given=size_given)
        if len(parts) == 2 and re.fullmatch(r"#?\s*[-+]?(0[xX][0-9a-fA-F]+|\d+)", second):
            off = _int(second.lstrip("#").strip(), "offset")
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=bw,
                           offset=off, size_given=size_given)
        if len(parts) > 3:
            raise _Fail("too many parts in [base, index, lsl #N]")
        index, iw = _a64_reg(second)
        if not index.startswith("x"):
            raise _Fail(f"{second} cannot be an index register")
        scale = _shift_scale(parts[2]) if len(parts) == 3 else 1
        return ArgSpec(arch, ArgKind.SIB, size, signed, is_float, reg=base, reg_width=bw,
                       index=index, index_width=iw, scale=scale, size_given=size_given)
    if s.startswith("#") or re.match(r"[-+]?\d", s):
        imm = _int(s.lstrip("#"), "constant")
        return ArgSpec(arch, ArgKind.CONST, size or 8, signed, is_float, imm=imm,
                       size_given=size_given)
    reg, width = _a64_reg(s)
    return ArgSpec(arch, ArgKind.REG, size or min(width, 8), signed, is_float, reg=reg,
                   reg_width=width, size_given=size_given)


def _a64_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = _a64_regname(a.reg or '', a.reg_width)
    elif k is ArgKind.DEREF:
        base = _a64_regname(a.reg or '', a.reg_width)
        op = f"[{base}, {a.offset}]" if a.offset else f"[{base}]"
    elif k is ArgKind.SIB:
        op = f"[{_a64_regname(a.reg or '', a.reg_width)}, {_a64_regname(a.index or '', a.index_width)}"
        if a.scale != 1:
            op += f", lsl #{a.scale.bit_length() - 1}"
        op += "]"
    elif k is ArgKind.SYM_REG:
        op = (f"[{_a64_regname(a.reg or '', a.reg_width)}, "
              f"#:{a.reloc}:{_fmt_disp(a.symbol, None, a.offset, True)}]")
    else:  # pragma: no cover - the parser makes no other kind
        raise UsdtSpecError(f"cannot format {k} for aarch64", arch=a.arch)
    return _size_prefix(a) + op


# ---------------------------------------------------------------------------
# arm (32-bit)

_ARM_CANON = {**{f"r{i}": f"r{i}" for i in range(11)}, "r11": "fp", "r12": "ip", "r13": "sp",
              "r14": "lr", "r15": "pc", "fp": "fp", "ip": "ip", "sp": "sp", "lr": "lr",
              "pc": "pc", "sb": "r9", "sl": "r10"}


def _arm_reg(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in _ARM_CANON:
        return _ARM_CANON[t], 4
    m = re.fullmatch(r"([sdq])(\d{1,2})", t)
    if m:
        n = int(m.group(2))
        limit = {"s": 31, "d": 31, "q": 15}[m.group(1)]
        if n <= limit:
            return t, {"s": 4, "d": 8, "q": 16}[m.group(1)]
    raise _Fail(f"unknown arm register {text.strip()!r}")


def _arm_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
               arch: str) -> ArgSpec:
    s = body.strip()
    if s.startswith("["):
        parts = _bracket_parts(s)
        base, bw = _arm_reg(parts[0])
        if bw != 4:
            raise _Fail(f"{parts[0]} cannot be a base register")
        size = size or 4
        if len(parts) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=4,
                           size_given=size_given)
        second = parts[1]
        if second.startswith("#"):
            if len(parts) != 2:
                raise _Fail("unexpected text after the offset")
            off = _int(second[1:], "offset")
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=4,
                           offset=off, size_given=size_given)
        if len(parts) > 3:
            raise _Fail("too many parts in [base, index, lsl #N]")
        index, iw = _arm_reg(second)
        if iw != 4:
            raise _Fail(f"{second} cannot be an index register")
        scale = _shift_scale(parts[2]) if len(parts) == 3 else 1
        return ArgSpec(arch, ArgKind.SIB, size, signed, is_float, reg=base, reg_width=4,
                       index=index, index_width=4, scale=scale, size_given=size_given)
    if s.startswith("#") or re.match(r"[-+]?\d", s):
        imm = _int(s.lstrip("#"), "constant")
        return ArgSpec(arch, ArgKind.CONST, size or 4, signed, is_float, imm=imm,
                       size_given=size_given)
    reg, width = _arm_reg(s)
    return ArgSpec(arch, ArgKind.REG, size or min(width, 8), signed, is_float, reg=reg,
                   reg_width=width, size_given=size_given)


def _arm_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = f"#{a.imm}"
    elif k is ArgKind.REG:
        op = str(a.reg)
    elif k is ArgKind.DEREF:
        op = f"[{a.reg}, #{a.offset}]" if a.offset else f"[{a.reg}]"
    elif k is ArgKind.SIB:
        op = f"[{a.reg}, {a.index}" + (f", lsl #{a.scale.bit_length() - 1}" if a.scale != 1
                                      else "") + "]"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for arm", arch=a.arch)
    return _size_prefix(a) + op


# ---------------------------------------------------------------------------
# riscv

_RV_ABI = ["zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1",
           *[f"a{i}" for i in range(8)], *[f"s{i}" for i in range(2, 12)],
           *[f"t{i}" for i in range(3, 7)]]
_RV_FABI = [*[f"ft{i}" for i in range(8)], "fs0", "fs1", *[f"fa{i}" for i in range(8)],
            *[f"fs{i}" for i in range(2, 12)], *[f"ft{i}" for i in range(8, 12)]]
_RV_REGS = {**{n: n for n in _RV_ABI}, **{f"x{i}": _RV_ABI[i] for i in range(32)},
            "fp": "s0"}
_RV_FREGS = {**{n: n for n in _RV_FABI}, **{f"f{i}": _RV_FABI[i] for i in range(32)}}


def _rv_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in _RV_REGS:
        return _RV_REGS[t], _WORD[arch]
    if t in _RV_FREGS:
        return _RV_FREGS[t], 8
    raise _Fail(f"unknown riscv register {text.strip()!r}")


def _rv_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
              arch: str) -> ArgSpec:
    s = body.strip()
    word = _WORD[arch]
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(reg)")
        base, bw = _rv_reg(rest[:-1], arch)
        if base in _RV_FREGS.values():
            raise _Fail(f"{rest[:-1]} cannot be a base register")
        off = _int(disp, "offset") if disp.strip() else 0
        return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=base,
                       reg_width=bw, offset=off, size_given=size_given)
    if re.match(r"[-+]?\d", s):
        return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float,
                       imm=_int(s, "constant"), size_given=size_given)
    reg, width = _rv_reg(s, arch)
    return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg, reg_width=width,
                   size_given=size_given)


def _rv_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = str(a.reg)
    elif k is ArgKind.DEREF:
        op = f"{a.offset}({a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for riscv", arch=a.arch)
    return _size_prefix(a) + op


# ---------------------------------------------------------------------------
# s390 / s390x

def _s390_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%([rf])(\d{1,2})", t)
    if m and int(m.group(2)) <= 15:
        return f"{m.group(1)}{int(m.group(2))}", _WORD[arch] if m.group(1) == "r" else 8
    raise _Fail(f"unknown s390 register {text.strip()!r} (expected %r0-%r15 or %f0-%f15)")


def _s390_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
                arch: str) -> ArgSpec:
    s = body.strip()
    word = _WORD[arch]
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(%rB) or off(%rX,%rB)")
        parts = [p.strip() for p in rest[:-1].split(",")]
        if len(parts) > 2:
            raise _Fail("memory operand must be off(%rB) or off(%rX,%rB)")
        off = _int(disp, "offset") if disp.strip() else 0
        regs = [_s390_reg(p, arch) for p in parts]
        if any(r.startswith("f") for r, _ in regs):
            raise _Fail("a floating-point register cannot address memory")
        if len(regs) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=regs[0][0],
                           reg_width=regs[0][1], offset=off, size_given=size_given)
        # D(X,B): X is the index, B the base
        (index, iw), (base, bw) = regs
        return ArgSpec(arch, ArgKind.SIB, size or word, signed, is_float, reg=base,
                       reg_width=bw, offset=off, index=index, index_width=iw,
                       size_given=size_given)
    if s.startswith("%"):
        reg, width = _s390_reg(s, arch)
        return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg,
                       reg_width=width, size_given=size_given)
    return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float, imm=_int(s, "constant"),
                   size_given=size_given)


def _s390_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = f"%{a.reg}"
    elif k is ArgKind.DEREF:
        op = f"{a.offset}(%{a.reg})"
    elif k is ArgKind.SIB:
        op = f"{a.offset}(%{a.index},%{a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for s390", arch=a.arch)
    return _size_prefix(a) + op


# ---------------------------------------------------------------------------
# ppc / ppc64: bare numbers are registers, 'i' marks an immediate (sdt.h's %I)

def _ppc_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%?r?(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"r{int(m.group(1))}", _WORD[arch]
    m = re.fullmatch(r"%f(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"f{int(m.group(1))}", 8
    raise _Fail(f"unknown ppc register {text.strip()!r} (expected N, %rN or %fN, N <= 31)")


def _ppc_parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
               arch: str) -> ArgSpec:
    s = body.strip()
    word = _WORD[arch]
    if s[:1] in ("i", "I"):
        return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float,
                       imm=_int(s[1:], "constant"), size_given=size_given)
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(%rN) or off(N)")
        reg, width = _ppc_reg(rest[:-1], arch)
        if reg.startswith("f"):
            raise _Fail("a floating-point register cannot address memory")
        off = _int(disp, "offset") if disp.strip() else 0
        return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=reg,
                       reg_width=width, offset=off, size_given=size_given)
    reg, width = _ppc_reg(s, arch)
    return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg, reg_width=width,
                   size_given=size_given)


def _ppc_format(a: ArgSpec) -> str:
    k = a.kind
    if k is ArgKind.CONST:
        op = f"i{a.imm}"
    elif k is ArgKind.REG:
        op = f"%{a.reg}"
    elif k is ArgKind.DEREF:
        op = f"{a.offset}(%{a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for ppc", arch=a.arch)
    return _size_prefix(a) + op


_PARSERS = {"x86": _x86_parse, "aarch64": _a64_parse, "arm": _arm_parse, "riscv": _rv_parse,
            "s390": _s390_parse, "ppc": _ppc_parse}
_FORMATTERS = {"x86": _x86_format, "aarch64": _a64_format, "arm": _arm_format,
               "riscv": _rv_format, "s390": _s390_format, "ppc": _ppc_format}


# ---------------------------------------------------------------------------
# public entry points

@lru_cache(maxsize=8192)
def _parse_cached(text: str, arch: str) -> ArgSpec:
    fam = _FAMILY.get(arch)
    if fam is None:
        arch = canonical_arch(arch)   # raises for unknown architectures
        fam = _FAMILY[arch]
    token = text.strip()
    try:
        if not token:
            raise _Fail("empty spec")
        size, signed, is_float, given, body = _split_size(token, arch)
        spec = _PARSERS[fam](body, size, signed, is_float, given, arch)
    except _Fail as exc:
        raise UsdtSpecError(str(exc), spec=token, arch=arch, expected=_EXPECTED[fam]) from None
    except (ValueError, KeyError, IndexError, OverflowError) as exc:  # defensive: never leak
        raise UsdtSpecError(f"cannot decode ({exc})", spec=token, arch=arch,
                            expected=_EXPECTED[fam]) from None
    return _with_text(spec, token)


def _with_text(spec: ArgSpec, text: str) -> ArgSpec:
    object.__setattr__(spec, "text", text)
    return spec


def parse_arg(text: str, arch: str = "x86_64", *, probe: str | None = None,
              index: int | None = None) -> ArgSpec:
    """Decode one argument spec such as ``-4@8(%rdi)`` for ``arch``.

    Raises :class:`~pyebpf.errors.UsdtSpecError` naming the spec, the forms
    the architecture accepts and (when given) the probe and argument index.
    """
    if not isinstance(text, str):
        raise UsdtSpecError(f"spec must be a string, not {type(text).__name__}", arch=arch)
    try:
        return _parse_cached(text.strip(), arch)
    except UsdtSpecError as exc:
        if probe is not None or index is not None:
            raise exc.with_context(probe, index) from None
        raise


def split_args(args: str) -> list[str]:
    """Split a note's argument string into spec tokens.

    Tokens are separated by whitespace, except inside ``[...]``/``(...)``
    (aarch64 and arm write ``-4@[sp, 12]`` with a space).  A token that starts
    like a new spec (``[-]N[f]@``) always starts a new argument, so an
    unbalanced bracket cannot swallow the arguments after it.
    """
    out: list[str] = []
    depth = 0
    for chunk in args.split():
        if out and depth > 0 and not _SIZE_RE.match(chunk):
            out[-1] += " " + chunk
        else:
            out.append(chunk)
            depth = 0
        depth += chunk.count("[") + chunk.count("(") - chunk.count("]") - chunk.count(")")
    return out


def parse_args(args: str, arch: str = "x86_64", *, probe: str | None = None
               ) -> tuple[ArgSpec | UndecodableArg, ...]:
    """Decode a whole argument string; never raises for a bad spec.

    Element *i* is argument *i*: an :class:`ArgSpec`, or an
    :class:`UndecodableArg` holding the :class:`~pyebpf.errors.UsdtSpecError`
    (with the probe and index) that it raises when used.
    """
    out: list[ArgSpec | UndecodableArg] = []
    for i, tok in enumerate(split_args(args)):
        try:
            out.append(_parse_cached(tok, arch))
        except UsdtSpecError as exc:
            out.append(UndecodableArg(tok, exc.with_context(probe, i), i))
    return tuple(out)

