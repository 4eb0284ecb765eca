"""A ``dis``-like disassembler: :func:`get_instructions` gives one
:class:`Instruction` record per instruction, :func:`disassemble` text for people.

Jump and call targets become synthetic labels in label mode (``L12`` for a
jump target, ``F12`` for a bpf-to-bpf function, the number being the slot
index), so the text assembles back to the same bytes.  Slots that are not a
valid instruction print as ``.8byte`` (see :mod:`pyebpf.text.common`); the
disassembler never fails on input bytes.
"""
from __future__ import annotations

import re
import struct
from typing import Container, Iterable, Mapping, Sequence

from .._record import Record, record
from ..errors import EncodingError, OptionError
from ..isa import Form, HELPERS, Insn, classify, is_jump, jump_offset, opcodes as op
from ..program.core import Program, RawSlot
from . import common
from .assembler import _dialect
from .llvm import KEYWORDS

__all__ = ["Instruction", "get_instructions", "disassemble", "decode_lenient", "context",
           "usable_label"]

_SLOT = struct.Struct("<BBhi")
_U64 = struct.Struct("<Q")
_REGISTER_RE = re.compile(r"[rRwW][0-9]+\Z")


@record
class Instruction(Record):
    """One disassembled instruction (compare :class:`dis.Instruction`)."""

    #: slot index (an ld_imm64 takes two slots)
    index: int  # type: ignore[assignment]  # shadows tuple.index: fine at run time, not to mypy
    insn: Insn                  #: the instruction
    form: Form | None           #: what it is, or None if it is not a valid instruction
    text: str                   #: its text in the requested dialect/style (labels substituted)
    target: int | None          #: slot index a jump/local call/func reference goes to
    target_label: str | None    #: the synthetic label of ``target`` (label mode), else None
    helper: str | None          #: ``bpf_...`` name of a called helper
    is_jump_target: bool        #: True if some instruction jumps or calls here
    label: str | None           #: this instruction's label: a symbol, or synthetic (label mode)
    error: str | None = None    #: why ``form`` is None

    # (duplicates: deliberate, one-line properties reading the instruction; alike by shape only)
    @property
    def slots(self) -> int:
        """1, or 2 for ld_imm64."""
        return self.insn.slots

    @property
    def opcode(self) -> int:
        """The opcode byte of :attr:`insn`."""
        return self.insn.code

    @property
    def origin(self) -> str | None:
        """The ``file:line`` that emitted the instruction (a Program's or
        assembled text's instructions know it; decoded bytes do not)."""
        return self.insn.origin

    @property
    def comment(self) -> str | None:
        """The instruction's own comment (:meth:`Program.comment`), if any."""
        return self.insn.comment


def decode_lenient(data: bytes | bytearray | memoryview) -> list[tuple[Insn, str | None]]:
    """Decode every slot of ``data``, never raising: ``(insn, problem)`` pairs.

    An ld_imm64 whose second slot is missing or not all-zero besides its
    immediate comes back as a one-slot problem, a
    :class:`~pyebpf.program.core.RawSlot` holding its exact bytes (printed as
    ``.8byte``, which assembles back to them); trailing bytes that are not a whole slot are
    reported as a problem and dropped.
    """
    mv = memoryview(data).cast("B")
    n = len(mv) // 8
    out: list[tuple[Insn, str | None]] = []
    slots = list(_SLOT.iter_unpack(mv[:n * 8]))
    i = 0
    while i < n:
        code, regs, off, imm = slots[i]
        if code == op.OP_LD_IMM64:
            if i + 1 < n and slots[i + 1][0] == 0 and slots[i + 1][1] == 0 and slots[i + 1][2] == 0:
                out.append((Insn(code, regs & 15, regs >> 4, off, imm, slots[i + 1][3]), None))
                i += 2
                continue
            out.append((RawSlot(_U64.unpack(mv[i * 8:i * 8 + 8])[0]),
                        "ld_imm64 without a valid second slot"))
            i += 1
            continue
        out.append((Insn(code, regs & 15, regs >> 4, off, imm), None))
        i += 1
    if len(mv) % 8:
        out.append((Insn(0), f"{len(mv) % 8} trailing bytes (not a whole 8-byte slot) ignored"))
    return out


def _as_insns(data: bytes | bytearray | memoryview | Iterable[Insn] | Program
              ) -> list[tuple[Insn, str | None]]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return decode_lenient(data)
    if isinstance(data, Program):
        # resolved offsets, shown with synthetic labels (map references stay symbolic)
        out: list[tuple[Insn, str | None]] = []
        for insn in data.finalize():
            if insn.target is not None:
                insn = insn.copy()
                insn.target = None
            out.append((insn, None))
        return out
    return [(insn, None) for insn in data]


def usable_label(name: str) -> bool:
    """Can ``name`` be a label in the text of both dialects, defined (``name:``)
    and jumped or called to alike?  Not when it is no single name token, a
    register (``r1``), an llvm-dialect word (``exit``, ``lock``, ``u32``...) or
    a helper's name (``call NAME`` calls the helper)."""
    return (common.is_identifier(name) and _REGISTER_RE.match(name) is None
            and name not in KEYWORDS and common.helper_id(name) is None)


def get_instructions(data: bytes | bytearray | memoryview | Iterable[Insn] | Program,
                     dialect: str = "llvm", style: str = "objdump",
                     labels: bool = True, symbols: Mapping[int, str] | None = None,
                     label_prefix: str = "",
                     relocated: Container[int] = ()) -> list[Instruction]:
    """One :class:`Instruction` per instruction of ``data`` (bytes, Insns or a Program).

    ``symbols`` names slots (an object file's functions and labels): each
    named slot gets that label, and jumps and calls to it use the name (the
    names must be :func:`usable_label` and distinct).  Other targets get
    synthetic labels, ``label_prefix`` + ``L<slot>`` (``F<slot>`` for a
    function), which the prefix keeps apart when several listings are joined.
    The slots in ``relocated`` hold an immediate a relocation fills in (an
    object file's calls to other sections): no target is read from it.
    """
    mod = _dialect(dialect)
    if style not in ("objdump", "verifier"):
        raise OptionError(f"unknown style {style!r} (use 'objdump' or 'verifier')")
    fmt = mod.format_insn
    items = _as_insns(data)
    # pass 1: slots, forms, targets
    n = len(items)
    index = [0] * n
    forms: list[Form | None] = [None] * n
    errors: list[str | None] = [None] * n
    targets: list[int | None] = [None] * n
    pos = 0
    for k, (insn, problem) in enumerate(items):
        index[k] = pos
        if problem is None:
            try:
                form = classify(insn)
            except EncodingError as exc:
                errors[k] = exc.reason
            else:
                forms[k] = form
                if insn.target is None and pos not in relocated:
                    if insn.code == op.OP_CALL and insn.imm == -1:
                        pass   # 'call -1': how an object file leaves a call to be relocated
                    elif is_jump(insn):
                        targets[k] = pos + 1 + jump_offset(insn)
                    elif form.kind == "lddw" and form.pseudo == op.PSEUDO_FUNC:
                        targets[k] = pos + 1 + insn.imm
        else:
            errors[k] = problem
        pos += 2 if (insn.code == op.OP_LD_IMM64 and problem is None) else 1
    starts = {index[k]: k for k in range(n)}
    # pass 2: label names (a symbol first; then a function entry wins over a plain jump target)
    named = {t: name for t, name in symbols.items() if t in starts} if symbols else {}
    names: dict[int, str] = {}
    for k in range(n):
        t = targets[k]
        if t is None or t not in starts or t in named:
            continue
        f = forms[k]
        assert f is not None      # only a classified instruction has a target
        is_func = f.kind == "call" or f.kind == "lddw"
        if is_func:
            names[t] = f"F{t}"
        elif t not in names:
            names[t] = f"L{t}"
    jumped_to = set(names) | {t for t in targets if t in named}
    if label_prefix or named:
        taken = set(named.values())
        for t, name in names.items():
            name = label_prefix + name
            while name in taken:
                name += "_"
            names[t] = name
    names.update(named)
    out: list[Instruction] = []
    for k, (insn, problem) in enumerate(items):
        f = forms[k]
        t = targets[k]
        tl = names.get(t) if (labels and t is not None) else None
        if f is None:
            text = _raw_text(insn, problem)
        else:
            text = fmt(insn, style, tl, f)
        helper = None
        if f is not None and f.kind == "call" and f.pseudo == op.CALL_HELPER:
            imm = insn.imm
            if 0 < imm < len(HELPERS):
                helper = HELPERS[imm].c_name
        pos = index[k]
        out.append(Instruction(pos, insn, f, text, t, tl, helper, pos in jumped_to,
                               names.get(pos) if labels else named.get(pos), errors[k]))
    return out


def _raw_text(insn: Insn, problem: str | None) -> str:
    if isinstance(insn, RawSlot):
        return f".8byte 0x{insn.value:016x}"
    if problem is not None and "trailing" in problem:
        return ""
    return common.raw_directive(insn)


def disassemble(data: bytes | bytearray | memoryview | Iterable[Insn] | Program,
                dialect: str = "llvm", style: str = "objdump", labels: bool = True,
                show_index: bool = False, comments: Mapping[int, str] | None = None,
                source: bool = False, mark: int | None = None,
                symbols: Mapping[int, str] | None = None, label_prefix: str = "",
                before: Mapping[int, Sequence[str]] | None = None,
                objdump_labels: bool = False, relocated: Container[int] = ()) -> str:
    """Disassemble ``data`` into text for people (one instruction per line).

    In label mode (the default) jump/call targets get synthetic labels and
    the text assembles back to the same bytes.  Helper calls carry their
    name as a comment (the ``verifier`` style prints it inline).  Invalid
    slots print as ``.8byte`` with the reason as a comment.  ``show_index``
    prefixes each instruction with its slot index (``  12: ``), which the
    assembler also accepts.  ``comments`` maps slot indexes to extra comments
    (e.g. the relocations of an ELF section); an instruction's own
    :attr:`~pyebpf.isa.Insn.comment` is printed too.

    Like :func:`dis.dis`, it can show where each instruction came from and
    point at one: ``source=True`` puts a ``# file:line`` line before each run
    of instructions emitted by the same source line, and ``mark=SLOT`` prefixes
    the instruction at that slot index with ``-->`` (the text then no longer
    assembles: it is for people, e.g. a verifier error in its context).

    For an object file's sections (:mod:`pyebpf.objects.listing`):
    ``symbols``, ``label_prefix`` and ``relocated`` are those of
    :func:`get_instructions`;
    ``before`` maps slot indexes to lines printed before the instruction,
    after its label (C source lines as ``; text``, comments as ``# text``);
    ``objdump_labels`` prints labels as llvm-objdump does, a blank line and
    ``0000000000000028 <name>:`` (the byte offset), which the assembler also
    reads as a label.
    """
    lines: list[str] = []
    append = lines.append
    comment_helpers = not (dialect == "llvm" and style == "verifier")
    last_origin: str | None = None
    pad = "" if mark is None else "    "
    for ins in get_instructions(data, dialect, style, labels, symbols, label_prefix, relocated):
        if source:
            origin = ins.origin
            if origin is not None and origin != last_origin:
                append(f"{pad}# {origin}")
            last_origin = origin
        if ins.label is not None:
            if objdump_labels:
                append("")
                append(f"{ins.index * 8:016x} <{ins.label}>:")
            else:
                append(f"{pad}{ins.label}:")
        if before is not None:
            for extra in before.get(ins.index, ()):
                append(f"{pad}{extra}")
        text = ins.text
        if ins.error is not None:
            if not text:
                append(f"# {ins.error}")
                continue
            text += f"  # {ins.error}"
        elif ins.helper is not None and comment_helpers:
            text += f"  # {ins.helper}"
        for note in (ins.comment, comments.get(ins.index) if comments else None):
            if note:
                text += ("; " if "  # " in text else "  # ") + note
        if mark is not None:
            pad = "--> " if ins.index == mark else "    "
        if show_index:
            append(f"{pad}{ins.index:6d}: {text}")
        else:
            append(f"{pad}    {text}")
        if mark is not None:
            pad = "    "
    return "\n".join(lines) + ("\n" if lines else "")



def context(insns: Iterable[Insn], index: int, before: int = 4, after: int = 2,
            dialect: str = "llvm", style: str = "verifier") -> str:
    """The instructions around slot ``index`` of ``insns``, for people: each
    with its slot index and the source line that emitted it, the one at
    ``index`` marked ``-->`` (what :class:`~pyebpf.errors.VerifierError` shows).
    Jumps print as offsets; an instruction that cannot be formatted prints as
    its raw fields.  Empty when ``index`` is past the end."""
    fmt = _dialect(dialect).format_insn
    rows: list[tuple[int, Insn]] = []
    at = None
    slot = 0
    for insn in insns:
        if slot <= index < slot + insn.slots:
            at = len(rows)
        rows.append((slot, insn))
        slot += insn.slots
        if at is not None and len(rows) > at + after:
            break
    if at is None:
        return ""
    lines = []
    for slot, insn in rows[max(0, at - before):at + after + 1]:
        try:
            text = fmt(insn, style)
        except Exception:          # a raw or invalid slot: still show where it is
            text = repr(insn)
        where = f"  # {insn.origin}" if insn.origin else ""
        lines.append(f"{'-->' if slot == rows[at][0] else '   '} {slot:5d}: {text}{where}")
    return "\n".join(lines)
