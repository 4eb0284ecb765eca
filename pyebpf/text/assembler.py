"""Text -> :class:`~pyebpf.program.core.Program`, for either dialect.

The dialect modules know statements; this module knows files: lines,
labels, the ``.8byte`` directive, the origin of each instruction, and turning
every problem into an :class:`~pyebpf.errors.AssemblyError` that names
``file:line:column``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast

from ..errors import AssemblyError, OptionError, ProgramError
from ..isa import Insn, opcodes as op
from ..program.core import Program, RawSlot
from . import common, llvm, mnemonic
from .lexer import Piece, TextError, Tok, fast_tokenize, is_call_relocation, split_line, tokenize

if TYPE_CHECKING:
    from typing import Protocol, Sequence, Union

    from ..isa import Form

    class _Dialect(Protocol):
        """What a dialect module provides (:mod:`.llvm`, :mod:`.mnemonic`)."""

        def parse_tokens(self, toks: list[Tok], opcode: int | None = None) -> Insn: ...

        def format_insn(self, insn: Insn, style: str = ..., label: str | None = None,
                        form: Form | None = None) -> str: ...

    #: a cached statement: its text, or (text, the verifier's opcode)
    _Key = Union[str, tuple[str, int]]
    #: the fields of a parsed Insn: code, dst, src, off, imm, next_imm, target, map_ref
    _Fields = tuple[int, int, int, int, int, Union[int, None], Union[str, None],
                    Union[str, None]]

__all__ = ["DIALECTS", "assemble", "parse_insn", "format_insn"]

#: dialect name -> module with ``parse_tokens(toks, opcode)`` and ``format_insn(insn, style, label)``
DIALECTS: dict[str, _Dialect] = {"llvm": llvm, "mnemonic": mnemonic}
_SEMICOLONS = {"llvm": True, "mnemonic": False}

# statement text (or (text, verifier opcode)) -> fields of the parsed Insn, per
# dialect; most programs repeat many lines
_CACHE: dict[str, dict[_Key, _Fields]] = {name: {} for name in ("llvm", "mnemonic")}
_CACHE_MAX = 1 << 16


def _dialect(name: str) -> _Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise OptionError(f"unknown dialect {name!r} (use 'llvm' or 'mnemonic')") from None


def raw_slots(values: list[tuple[int, int]]) -> list[Insn]:
    """Instructions from ``.8byte`` values ``[(value, col), ...]``: each value
    is one slot; an ld_imm64 slot (opcode 0x18) followed in the same directive
    by a valid second slot makes one ld_imm64, and one without it stays a
    :class:`~pyebpf.program.core.RawSlot` (its exact 8 bytes, which the
    disassembler prints for such a slot)."""
    out: list[Insn] = []
    i, n = 0, len(values)
    while i < n:
        value, col = values[i]
        if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
            raise TextError("a .8byte value must fit in 64 bits", col)
        if value & 0xFF == 0x18 and not (i + 1 < n and values[i + 1][0] & 0xFFFFFFFF == 0):
            out.append(RawSlot(value))
            i += 1
            continue
        take = 2 if value & 0xFF == 0x18 else 1
        out += common.raw_insns(values[i:i + take])
        i += take
    return out


def _directive(toks: list[Tok]) -> list[Insn]:
    name = cast(str, toks[0].value)
    if name in (".8byte", ".quad", ".dword"):
        return raw_slots(common.parse_raw_values(toks))
    raise TextError(f"unknown directive {name!r} (only .8byte is supported)", toks[0].col)


def _with_columns(piece: Piece, toks: list[Tok]) -> list[Tok]:
    """``toks`` (the tail of ``piece``'s tokens) again, with their columns."""
    if not toks or toks[0].col:
        return toks
    full = tokenize(piece.text, piece.col)
    return full[len(full) - len(toks):]


def _column(piece: Piece, toks: list[Tok], i: int) -> int:
    return _with_columns(piece, toks)[i].col


def _label_col(text: str, name: str) -> int:
    """Column of the name ``name`` in ``text`` (for errors found after parsing)."""
    m = re.search(r"(?<![\w.$])" + re.escape(name) + r"(?![\w.$])", text)
    return m.start() + 1 if m else 1


def assemble(text: str, dialect: str = "llvm", filename: str = "<string>") -> Program:
    """Assemble ``text`` into a :class:`Program` (labels resolved, checked).

    Every instruction gets ``origin="FILENAME:LINE"``.  Raises
    :class:`AssemblyError` (file:line:column, the line and a caret) for an
    unknown mnemonic, a bad register, an immediate, offset or jump out of
    range, a wrong operand count, a duplicate or unknown label.
    """
    mod = _dialect(dialect)
    parse = mod.parse_tokens
    semicolons = _SEMICOLONS[dialect]
    implicit_exit = dialect == "mnemonic"
    prog = Program()
    append = prog.append
    label_at: dict[str, tuple[int, bool]] = {}      # label -> (line, explicit?)
    cache = _CACHE[dialect]
    lines = text.splitlines()
    lineno = 0
    insns = prog.insns
    # llvm-objdump -r: a call followed by its R_BPF_64_32 line is a relative call
    relocatable = dialect == "llvm"
    last_call: Insn | None = None       # the previous line's helper call
    pending: AssemblyError | None = None    # the previous line's 'call -N', if no relocation
    for line in lines:
        lineno += 1
        if not line or line.isspace():
            continue
        pieces = split_line(line, semicolons)
        if last_call is not None:
            if not pieces and is_call_relocation(line):
                last_call.src = op.CALL_LOCAL      # llvm's meaning: a relocated call
                pending = last_call = None
                continue
            if pending is not None:
                raise pending
            last_call = None
        origin = f"{filename}:{lineno}"
        count = len(insns)
        try:
            for piece in pieces:
                key: _Key = piece.text.strip() if piece.opcode is None else (
                    piece.text.strip(), piece.opcode)
                hit = cache.get(key)
                if hit is not None:
                    code, dst, src, off, imm, nxt, target, map_ref = hit
                    if implicit_exit and code == 0x95 and "exit" not in label_at:
                        prog.label("exit", origin=origin)
                        label_at["exit"] = (lineno, False)
                    append(Insn(code, dst, src, off, imm, nxt, target=target, map_ref=map_ref,
                                origin=origin))
                    continue
                toks = fast_tokenize(piece.text)
                if toks is None:     # a bad character: the slow path reports it
                    toks = tokenize(piece.text, piece.col)
                pure = True
                # labels: "name:" (possibly followed by a statement)
                while len(toks) >= 2 and toks[1].key == ":" and toks[0].key == "id":
                    name = cast(str, toks[0].value)
                    if name in label_at:
                        line0, explicit = label_at[name]
                        why = (f"at line {line0}" if explicit else
                               f"implicitly by the first exit, at line {line0}")
                        raise TextError(f"duplicate label {name!r} (already defined {why})",
                                        _column(piece, toks, 0))
                    prog.label(name, origin=origin)
                    label_at[name] = (lineno, True)
                    toks = toks[2:]
                    pure = False
                if not toks:
                    continue
                new: Sequence[Insn]
                head = toks[0].value
                if toks[0].key == "id" and isinstance(head, str) and head[0] == "." \
                        and len(head) > 1:
                    new = _directive(_with_columns(piece, toks))
                else:
                    try:
                        insn = parse(toks, piece.opcode)
                    except TextError as exc:
                        if exc.call_imm is None or not (relocatable and piece is pieces[-1]):
                            parse(_with_columns(piece, toks), piece.opcode)  # with the column
                            raise
                        # 'call -N': kept if llvm-objdump's relocation line follows, else refused
                        insn = Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, exc.call_imm)
                        pending = AssemblyError(exc.message, filename, lineno,
                                                _column(piece, toks, len(toks) - 1), line)
                        pure = False        # (not cached: the next line decides)
                    if pure:
                        if len(cache) >= _CACHE_MAX:
                            cache.clear()
                        cache[key] = (insn.code, insn.dst, insn.src, insn.off, insn.imm,
                                      insn.next_imm, insn.target, insn.map_ref)
                    new = (insn,)
                for insn in new:
                    if implicit_exit and insn.code == 0x95 and "exit" not in label_at:
                        prog.label("exit", origin=origin)
                        label_at["exit"] = (lineno, False)
                    insn.origin = origin
                    append(insn)
        except TextError as exc:
            raise AssemblyError(exc.message, filename, lineno, exc.col, line) from None
        except ValueError as exc:      # e.g. int() of a number over 4300 digits in the lexer
            raise AssemblyError(_unreadable(exc), filename, lineno, 1, line) from None
        if relocatable and len(insns) > count:
            tail = insns[-1]
            if tail.code == op.OP_CALL and tail.src == op.CALL_HELPER:
                last_call = tail
    if pending is not None:
        raise pending
    _check_targets(prog, lines, filename)
    return prog


def _lineno(origin: str | None) -> int:
    if origin:
        tail = origin.rpartition(":")[2]
        if tail.isdigit():
            return int(tail)
    return 0


def _unknown_target(insn: Insn, target: str, known: str) -> str:
    """The message for a jump or call to a name that is no label: after
    ``call``, a name close to a helper's is taken for its typo, as the DSL does."""
    if insn.code == op.JMP | op.CALL:
        from ..errors import close_matches
        from ..isa.helpers import HELPERS
        names = [f"bpf_{h.name}" for h in HELPERS if h.name]
        word = target if target.startswith("bpf_") else f"bpf_{target}"
        close = close_matches(word, names, n=3, cutoff=0.8)
        if close:
            return (f"unknown helper or function {target!r}; did you mean "
                    f"{', '.join(close)}? (functions defined: {known})")
        return f"unknown helper or function {target!r} (functions defined: {known})"
    return f"unknown label {target!r} (defined: {known})"


def _check_targets(prog: Program, lines: list[str], filename: str) -> None:
    """Unknown labels and jumps that do not fit, reported at their line and column."""
    labels = prog.labels
    for insn in prog.insns:
        target = insn.target
        if target is not None and target not in labels:
            n = _lineno(insn.origin)
            text = lines[n - 1] if n else ""
            known = ", ".join(sorted(labels)) or "none"
            raise AssemblyError(_unknown_target(insn, target, known), filename, n,
                                _label_col(text, target), text)
    try:
        prog.finalize()
    except ProgramError as exc:
        n = _lineno(exc.origin)
        line = lines[n - 1] if n else None
        bad = next((i for i in prog.insns if i.origin == exc.origin and i.target), None)
        col = _label_col(line, bad.target) if (line and bad is not None and bad.target) else 1
        raise AssemblyError(exc.reason, filename, n, col, line) from None


def parse_insn(line: str, dialect: str = "llvm") -> Insn:
    """Parse one instruction (comments and tool decorations allowed, no label).

    A jump to a label comes back with ``insn.target`` set and a zero offset.
    """
    mod = _dialect(dialect)
    try:
        pieces = split_line(line, _SEMICOLONS[dialect])
        if len(pieces) != 1:
            raise TextError("expected exactly one instruction" if pieces else "no instruction",
                            pieces[1].col if len(pieces) > 1 else 1)
        piece = pieces[0]
        toks = tokenize(piece.text, piece.col)
        if not toks:
            raise TextError("no instruction", 1)
        head = toks[0].value
        if toks[0].key == "id" and isinstance(head, str) and head[0] == "." and len(head) > 1:
            new = _directive(toks)
            if len(new) != 1:
                raise TextError("expected exactly one instruction", toks[0].col)
            return new[0]
        return mod.parse_tokens(toks, piece.opcode)
    except TextError as exc:
        raise AssemblyError(exc.message, "<string>", 1, exc.col, line) from None
    except ValueError as exc:
        raise AssemblyError(_unreadable(exc), "<string>", 1, 1, line) from None


def _unreadable(exc: ValueError) -> str:
    """The message for a line whose reading failed outside the parser's checks."""
    if "digits" in str(exc):
        return "a number is too long (more than 4300 digits)"
    return f"cannot read this line ({exc})"


def format_insn(insn: Insn, dialect: str = "llvm", style: str = "objdump") -> str:
    """``insn`` as text: ``dialect`` ``"llvm"`` (``style`` ``"objdump"`` or
    ``"verifier"``) or ``"mnemonic"``.  Invalid instructions print as ``.8byte``."""
    return _dialect(dialect).format_insn(insn, style)
