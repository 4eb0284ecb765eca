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

Layout: this module holds what every architecture shares (the records, the
architecture names, the entry points) and dispatches a token to the decoder
of its architecture family, one module each, as libbpf keeps one parser per
architecture: :mod:`~pyebpf.usdt.spec.x86` (x86_64, x32, i386),
:mod:`~pyebpf.usdt.spec.aarch64`, :mod:`~pyebpf.usdt.spec.arm`,
:mod:`~pyebpf.usdt.spec.riscv`, :mod:`~pyebpf.usdt.spec.s390` and
:mod:`~pyebpf.usdt.spec.ppc`.  Each has ``parse`` (an operand to a record),
``FORMS`` (each kind's canonical text, as data), ``reg_as_written`` and
``EXPECTED`` (the forms it accepts); the operand syntax they share (integers,
displacements, the size prefix) is here.  A family's module is imported
when a spec of its architecture is first parsed or formatted, so importing
this module costs no decoder.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, cast

from ...errors import UsdtSpecError

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
        return _unparse(self, _family_of(self.arch).FORMS, _FAMILY[self.arch])

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
            written = _family_of(self.arch).reg_as_written(self)
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

#: architecture -> its family: the module of this package that decodes it.
_FAMILY = {"x86_64": "x86", "x32": "x86", "i386": "x86", "aarch64": "aarch64",
           "aarch64_ilp32": "aarch64", "arm": "arm", "riscv64": "riscv", "riscv32": "riscv",
           "s390x": "s390", "s390": "s390", "ppc64": "ppc", "ppc64le": "ppc", "ppc": "ppc"}

#: architecture -> its word size in bytes (the size of size-less constants and memory operands).
_WORD = {"x86_64": 8, "x32": 8, "i386": 4, "aarch64": 8, "aarch64_ilp32": 8, "arm": 4,
         "riscv64": 8, "riscv32": 4, "s390x": 8, "s390": 4, "ppc64": 8, "ppc64le": 8, "ppc": 4}


def canonical_arch(arch: str) -> str:
    """``amd64`` -> ``x86_64``, ``arm64`` -> ``aarch64``...; raises
    :class:`~pyebpf.errors.UsdtSpecError` for an architecture with no decoder."""
    a = _ARCH_ALIASES.get(arch, arch)
    if a not in _FAMILY:
        raise UsdtSpecError(f"no USDT argument decoder for architecture {arch!r}", arch=arch,
                            expected="one of " + ", ".join(SUPPORTED_ARCHES))
    return a


def expected_forms(arch: str) -> str:
    """The spec forms :func:`parse_arg` accepts for ``arch``, as text."""
    return _family_of(canonical_arch(arch)).EXPECTED


# ---------------------------------------------------------------------------
# operand syntax shared by the architectures: the size prefix, gas integers,
# displacement expressions with at most one symbol, [...] brackets

class _Fail(Exception):
    """Internal: a decoding failure; turned into UsdtSpecError by parse_arg."""


# numbers, symbols and the size prefix

_INT_RE = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)\Z")
_SIZE_RE = re.compile(r"(-?)(\d+)(f?)@")
_SYM_RE = re.compile(r"[A-Za-z_.][\w.$]*")
_RELOC_RE = re.compile(r"@([A-Za-z][A-Za-z0-9_]*)")
_NUM_RE = re.compile(r"(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)")
_U64 = 1 << 64
_S64_MIN = -(1 << 63)

#: gas relocation operators (``sym@GOTPCREL``): :func:`_expr` spells these upper-case.
_X86_RELOCS = {"GOTPCREL", "GOTOFF", "GOT", "PLT", "TPOFF", "NTPOFF", "DTPOFF", "GOTTPOFF",
               "GOTNTPOFF", "INDNTPOFF", "TLSGD", "TLSLD", "TLSLDM", "GOTPLT", "PLTOFF",
               "GOTPCRELX", "SIZE"}


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
    """A displacement as text: ``sym@RELOC+off``, or the number (nothing for
    0 unless ``always``)."""
    if symbol is None:
        return str(offset) if (offset or always) else ""
    s = symbol + (f"@{reloc}" if reloc else "")
    return s + _signed_addend(offset).replace(" ", "")


def _signed_addend(offset: int) -> str:
    """An addend as text: `` + 8``, `` - 8``, nothing for 0."""
    if not offset:
        return ""
    return f" + {offset}" if offset > 0 else f" - {-offset}"


def _size_prefix(a: ArgSpec) -> str:
    """The ``[-]N[f]@`` of ``a`` as written (nothing for a size-less spec)."""
    if not a.size_given:
        return ""
    return f"{'-' if a.signed else ''}{a.size}{'f' if a.is_float else ''}@"


# building and formatting records

class _Maker:
    """Makes the :class:`ArgSpec` of one token: the fields its size prefix and
    architecture fix are given once, ``mk(kind, default_size, **fields)`` per form."""

    __slots__ = ("arch", "word", "size", "signed", "is_float", "size_given")

    def __init__(self, arch: str, size: int, signed: bool, is_float: bool,
                 size_given: bool) -> None:
        self.arch, self.size, self.signed = arch, size, signed
        self.is_float, self.size_given = is_float, size_given
        #: the architecture's word size: the size of size-less constants and memory operands
        self.word = _WORD[arch]

    def __call__(self, kind: ArgKind, default_size: int, **fields: Any) -> ArgSpec:
        """The record of ``kind``; its size is the token's, else ``default_size``."""
        return ArgSpec(self.arch, kind, self.size or default_size, self.signed, self.is_float,
                       size_given=self.size_given, **fields)


#: the maker of a (arch, size, signed, float, size given): a few dozen in use, made once each
_maker = lru_cache(maxsize=512)(_Maker)


def _unparse(a: ArgSpec, forms: dict[ArgKind, Callable[[ArgSpec], str]], family: str) -> str:
    """The canonical text of ``a``: its size prefix and its operand as the
    family's ``forms`` (kind -> writer) write it."""
    write = forms.get(a.kind)
    if write is None:  # pragma: no cover - the parsers make no other kind
        raise UsdtSpecError(f"cannot format {a.kind} for {family}", arch=a.arch)
    return _size_prefix(a) + write(a)


# riscv, s390 and ppc memory operands

def _parens(s: str, forms: str) -> tuple[str, str]:
    """``off(inside)`` -> (``off`` text, ``inside``); ``forms`` names the
    accepted spellings in the error."""
    disp, _, rest = s.partition("(")
    if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
        raise _Fail(f"memory operand must be {forms}")
    return disp, rest[:-1]


def _offset(disp: str) -> int:
    """The displacement before ``(``: an integer, 0 when left out."""
    return _int(disp, "offset") if disp.strip() else 0


# aarch64 and arm memory operands

def _bracket_parts(s: str) -> list[str]:
    """``[x0, 16]`` -> ``["x0", "16"]`` (at least the base register)."""
    if not (s.startswith("[") and s.endswith("]")):
        raise _Fail("memory operand must be [reg] or [reg, off]")
    inner = s[1:-1]
    if "[" in inner or "]" in inner:
        raise _Fail("nested brackets")
    parts = [p.strip() for p in inner.split(",")]
    if not parts[0]:
        raise _Fail("missing base register")
    return parts


def _bracket_operand(s: str, mk: _Maker, reg: Callable[[str], tuple[str, int]],
                     usable: Callable[[str, int, str], bool],
                     offset_form: Callable[[list[str], str, int, _Maker], ArgSpec | None]
                     ) -> ArgSpec:
    """The operand grammar arm and aarch64 share: ``#imm``/``imm``, a register,
    ``[base]``, ``[base, <offset_form>]``, ``[base, index]`` and
    ``[base, index, lsl #s]``.

    ``reg`` reads a register (name, width); ``usable(reg, width, role)`` says
    whether it may be the "base" or the "index"; ``offset_form(parts, base,
    width, mk)`` reads the family's ``[base, ...]`` offset forms (None: not one).
    """
    if not s.startswith("["):
        if s.startswith("#") or re.match(r"[-+]?\d", s):
            return mk(ArgKind.CONST, mk.word, imm=_int(s.lstrip("#"), "constant"))
        name, width = reg(s)
        return mk(ArgKind.REG, min(width, 8), reg=name, reg_width=width)
    parts = _bracket_parts(s)
    base, bw = reg(parts[0])
    if not usable(base, bw, "base"):
        raise _Fail(f"{parts[0]} cannot be a base register")
    if len(parts) == 1:
        return mk(ArgKind.DEREF, mk.word, reg=base, reg_width=bw)
    spec = offset_form(parts, base, bw, mk)
    if spec is not None:
        return spec
    if len(parts) > 3:
        raise _Fail("too many parts in [base, index, lsl #N]")
    index, iw = reg(parts[1])
    if not usable(index, iw, "index"):
        raise _Fail(f"{parts[1]} cannot be an index register")
    scale = _shift_scale(parts[2]) if len(parts) == 3 else 1
    return mk(ArgKind.SIB, mk.word, reg=base, reg_width=bw, index=index, index_width=iw,
              scale=scale)


def _shift_scale(text: str) -> int:
    """``lsl #N`` after an index register -> the scale ``1 << N`` (N <= 3)."""
    m = re.fullmatch(r"lsl\s*#?\s*(\d+)", text.strip(), re.I)
    if not m:
        raise _Fail(f"expected 'lsl #N' after the index register, got {text!r}")
    sh = int(m.group(1))
    if sh > 3:
        raise _Fail(f"index shift {sh} out of range 0-3")
    return 1 << sh


# ---------------------------------------------------------------------------
# one decoder module per architecture family

if TYPE_CHECKING:
    from typing import Protocol

    class _Family(Protocol):
        """What each family module (``x86``, ``aarch64``...) provides."""

        EXPECTED: str

        #: kind -> the writer of an operand of that kind (see :func:`_unparse`)
        FORMS: dict[ArgKind, Callable[[ArgSpec], str]]

        def parse(self, body: str, mk: _Maker) -> ArgSpec: ...

        def reg_as_written(self, a: ArgSpec) -> str | None: ...


#: canonical architecture -> the decoder module of its family, imported on first use.
_DECODERS: dict[str, _Family] = {}


def _load_family(arch: str) -> _Family:
    """Import the decoder module of ``arch``'s family (the first time it is needed)."""
    import importlib
    family = _FAMILY[arch]
    module = cast("_Family", importlib.import_module(f"{__name__}.{family}"))
    for a, f in _FAMILY.items():
        if f == family:
            _DECODERS[a] = module
    return module


def _family_of(arch: str) -> _Family:
    """The decoder module of a canonical architecture name."""
    return _DECODERS.get(arch) or _load_family(arch)


# ---------------------------------------------------------------------------
# public entry points

@lru_cache(maxsize=8192)
def _parse_cached(text: str, arch: str) -> ArgSpec:
    family = _DECODERS.get(arch)
    if family is None:
        arch = canonical_arch(arch)   # raises for unknown architectures
        family = _family_of(arch)
    token = text.strip()
    try:
        if not token:
            raise _Fail("empty spec")
        size, signed, is_float, given, body = _split_size(token, arch)
        spec = family.parse(body, _maker(arch, size, signed, is_float, given))
    except _Fail as exc:
        raise UsdtSpecError(str(exc), spec=token, arch=arch, expected=family.EXPECTED) from None
    except (ValueError, KeyError, IndexError, OverflowError) as exc:  # defensive: never leak
        raise UsdtSpecError(f"cannot decode ({exc})", spec=token, arch=arch,
                            expected=family.EXPECTED) from None
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


if TYPE_CHECKING:
    # every family module has the _Family interface
    from . import aarch64, arm, ppc, riscv, s390, x86
    _CHECKED: tuple[_Family, ...] = (x86, aarch64, arm, ppc, riscv, s390)
    # the x86 register tables, which tests read from here
    from .x86 import _X86_R32 as _X86_R32, _X86_R64 as _X86_R64
else:
    def __getattr__(name: str) -> Any:
        # PEP 562: the x86 register tables, without loading x86 with this module
        if name in ("_X86_R32", "_X86_R64"):
            return getattr(_family_of("x86_64"), name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
