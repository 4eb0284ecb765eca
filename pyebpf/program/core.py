"""The :class:`Program`: an ordered list of instructions with labels,
subprograms and symbolic map references, resolved into bytes on demand.

Instructions may carry a symbolic ``target`` (a label name) instead of a
numeric offset; :meth:`Program.finalize` lays the main body and every
subprogram out, resolves each target to a slot-relative offset and checks that
it fits.  Instructions keep the ``file:line`` that emitted them (``origin``),
so any later error -- including the kernel verifier's -- can point at it.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any, Iterable, Iterator

from ..errors import EncodingError, ProgramError
from ..isa import Insn, encode as _encode, is_jump, opcodes as op, set_jump_offset
from . import dsl as _dsl
from .dsl import InstructionBuilder
from .idioms import Idioms
from .output import Output



_ORIGINS: dict[tuple[str, int], str] = {}       # (filename, line) -> the shared "file:line" string
_PKG_DIR = _dsl._PKG_DIR


def caller_origin(depth: int = 2) -> str:
    """``file:line`` of the nearest frame outside the pyebpf package.

    For appended instructions, labels, stack slots and errors; the builder
    methods record their origins on their hot path (``InstructionBuilder._emit``,
    which caches which code objects are pyebpf's).
    """
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith(_PKG_DIR):
        frame = frame.f_back
    if frame is None:
        return "<pyebpf>"  # pragma: no cover - called from inside pyebpf only
    key = (frame.f_code.co_filename, frame.f_lineno)
    origin = _ORIGINS.get(key)
    if origin is None:
        if len(_ORIGINS) > 100_000:
            _ORIGINS.clear()
        origin = _ORIGINS[key] = f"{key[0]}:{key[1]}"
    return origin


class RawSlot(Insn):
    """One 8-byte slot kept as its raw little-endian ``value`` because no
    instruction can hold it: the first half of an ``ld_imm64`` (opcode 0x18)
    whose second half is missing or is not a valid second slot.

    Such bytes come from ``.8byte`` text and from disassembled bytes; a
    RawSlot keeps them exact.  It counts as one slot, :meth:`Program.encode`
    writes exactly its 8 bytes, and it is never a valid instruction: its
    ``code`` field reads 0x00 (an opcode nothing accepts, so the checker and
    the kernel refuse it like the lone slot it stands for); ``dst``, ``src``,
    ``off`` and ``imm`` are the slot's own.
    """

    __slots__ = ("value",)

    def __init__(self, value: int, *, origin: str | None = None) -> None:
        value &= 0xFFFFFFFFFFFFFFFF
        self.value = value
        regs = (value >> 8) & 0xFF
        off = (value >> 16) & 0xFFFF
        imm = value >> 32
        super().__init__(0, regs & 15, regs >> 4, off - ((off & 0x8000) << 1),
                         imm - ((imm & 0x80000000) << 1), origin=origin)

    def encode(self) -> bytes:
        """The slot's 8 bytes, exactly."""
        return self.value.to_bytes(8, "little")

    def fields(self) -> tuple[int | str | None, ...]:
        """What makes two slots equal: the raw value."""
        return ("raw", self.value)

    def copy(self) -> "RawSlot":
        """A copy with the same value and origin."""
        new = RawSlot(self.value)
        new._origin = self._origin
        return new

    def __repr__(self) -> str:
        return f"RawSlot(0x{self.value:016x})"


def encode_insns(insns: "list[Insn]") -> bytes:
    """The bytes of ``insns`` (:func:`pyebpf.isa.encode`, and RawSlots exactly)."""
    if any(type(i) is RawSlot for i in insns):
        return b"".join(i.encode() for i in insns)
    return _encode(insns)


class StackFrame:
    """Allocates space on the 512-byte BPF stack (addressed as ``r10 - N``).

    ``alloc(size)`` returns the (negative) offset from r10 of a new slot; the
    frame refuses to grow past 512 bytes, naming the line that asked.
    """

    LIMIT = op.STACK_SIZE

    def __init__(self) -> None:
        self.used = 0
        self.slots: list[tuple[int, int, str]] = []  # (offset, size, origin)

    def alloc(self, size: int, align: int = 8) -> int:
        """Reserve ``size`` bytes aligned to ``align``; return the offset from r10."""
        if size <= 0:
            raise ProgramError(f"stack slot size must be positive, not {size}", caller_origin())
        if align not in (1, 2, 4, 8):
            raise ProgramError(f"stack alignment must be 1, 2, 4 or 8, not {align}", caller_origin())
        end = self.used + size
        end = (end + align - 1) // align * align
        if end > self.LIMIT:
            raise ProgramError(
                f"stack frame would need {end} bytes, over the kernel's limit of {self.LIMIT} "
                f"(already used: {self.used}); use a per-CPU array map as scratch space for large buffers",
                caller_origin())
        self.used = end
        self.slots.append((-end, size, caller_origin()))
        return -end

    @property
    def free(self) -> int:
        """Bytes of stack still free."""
        return self.LIMIT - self.used


class Program(Output, Idioms, InstructionBuilder):
    """A sequence of eBPF instructions under construction.

    Args:
        name: the program name given to the kernel (up to 15 characters).
        license: the licence string (``"GPL"`` lets the program call GPL-only helpers).

    Labels are defined with :meth:`label`; jumps refer to them by name and
    may point forwards or backwards.  Subprograms (bpf-to-bpf functions) are
    bodies of their own, laid out after the main body; call them by name.
    Map references (``ld_imm64`` with ``map_ref``) are bound to real map file
    descriptors when the program is loaded.
    """

    def __init__(self, name: str = "", license: str = "GPL"):
        self.name = name
        self.license = license
        self.insns: list[Insn] = []
        self._labels: dict[str, int] = {}
        self._label_origin: dict[str, str] = {}
        self.subprograms: dict[str, "Program"] = {}
        self.maps: dict[str, Any] = {}
        self._cache: list[Insn] | None = None
        self._comments: dict[int, str] = {}     # index of a future instruction -> comment
        self.stack = StackFrame()

    # ------------------------------------------------------------ building
    def append(self, insn: Insn) -> Insn:
        """Append one instruction; record the caller's ``file:line`` if it has no origin."""
        if insn.origin is None:
            insn.origin = caller_origin()
        self.insns.append(insn)
        self._cache = None
        return insn

    def extend(self, insns: Iterable[Insn]) -> None:
        """Append each of ``insns`` (see :meth:`append`)."""
        for insn in insns:
            self.append(insn)

    def comment(self, text: str) -> "Program":
        """Attach ``text`` as a comment to the next instruction emitted (the
        disassembler prints it, e.g. to title a section of generated code);
        several comments before one instruction are joined.  Returns the
        program, for chaining."""
        at = len(self.insns)
        old = self._comments.get(at)
        self._comments[at] = text if old is None else f"{old}; {text}"
        self._cache = None
        return self

    def _attach_comments(self) -> None:
        """Give each pending comment to its instruction (those emitted since)."""
        pending = self._comments
        n = len(self.insns)
        for at in [i for i in pending if i < n]:
            insn = self.insns[at]
            text = pending.pop(at)
            insn.comment = text if insn.comment is None else f"{insn.comment}; {text}"

    def label(self, name: str, *, origin: str | None = None) -> str:
        """Define label ``name`` at the current end of the program."""
        if name in self._labels:
            raise ProgramError(f"label {name!r} is already defined (at {self._label_origin[name]})",
                               origin or caller_origin())
        self._labels[name] = len(self.insns)
        self._label_origin[name] = origin or caller_origin()
        self._cache = None
        return name

    @property
    def labels(self) -> dict[str, int]:
        """Label name -> index into :attr:`insns` (instruction index, not slot)."""
        return dict(self._labels)

    def subprogram(self, name: str) -> "Program":
        """Create (or return) the subprogram ``name``; build its body on the result.

        The first subprogram instruction is reachable by ``call`` with the
        subprogram's name; subprograms may call each other.
        """
        if name in self._labels:
            raise ProgramError(f"subprogram {name!r} clashes with a label of the main body",
                               caller_origin())
        sub = self.subprograms.get(name)
        if sub is None:
            sub = Program(name)
            self.subprograms[name] = sub
            self._cache = None
        return sub

    def drop_unreachable(self) -> int:
        """Remove the instructions that no path from a body's first one
        reaches, in the main body and in each subprogram, and return how many
        went. The kernel refuses a program with any (``unreachable insn``);
        a generator that folds a constant condition, or ends both arms of a
        branch with a jump, may leave some. Labels move with the code; a
        removed instruction's comment goes to the next one kept. A body with
        a jump given as a raw offset (no label), or with raw slots, is left
        as it is."""
        self._attach_comments()
        removed = _drop_unreachable(self)
        for sub in self.subprograms.values():
            sub._attach_comments()
            removed += _drop_unreachable(sub)
        if removed:
            self._cache = None
        return removed

    # ------------------------------------------------------------ layout
    def layout(self) -> tuple[list[Insn], dict[str, int]]:
        """The flat instruction list (main body then subprograms) and every
        label's instruction index in it, with subprogram labels qualified as
        ``sub.label`` (and the subprogram's own name at its start)."""
        flat: list[Insn] = list(self.insns)
        labels: dict[str, int] = dict(self._labels)
        for sname, sub in self.subprograms.items():
            if sub.subprograms:
                raise ProgramError(f"subprogram {sname!r} has nested subprograms; declare them on the main program")
            base = len(flat)
            labels[sname] = base
            for lname, idx in sub._labels.items():
                labels[f"{sname}.{lname}"] = base + idx
            flat.extend(sub.insns)
        return flat, labels

    def finalize(self) -> list[Insn]:
        """Resolve every symbolic target and return the final instructions.

        The result is a list of copies; the program itself keeps its symbols,
        so it can be extended and finalized again.
        """
        if self._cache is not None:
            return self._cache
        self._attach_comments()
        for sub in self.subprograms.values():
            sub._attach_comments()
        flat, labels = self.layout()
        # slot index of every instruction (ld_imm64 takes two slots)
        slots = [0] * (len(flat) + 1)
        pos = 0
        for i, insn in enumerate(flat):
            slots[i] = pos
            pos += 2 if insn.code == op.OP_LD_IMM64 else 1
        slots[len(flat)] = pos
        # which body each instruction belongs to, for local label lookup
        owners: list[str | None] = [None] * len(self.insns)
        for sname, sub in self.subprograms.items():
            owners.extend([sname] * len(sub.insns))
        out: list[Insn] = []
        for i, insn in enumerate(flat):
            target = insn.target
            if target is None:
                out.append(insn)
                continue
            new = insn.copy()
            owner = owners[i]
            idx = None
            if owner is not None:
                idx = labels.get(f"{owner}.{target}")
            if idx is None:
                idx = labels.get(target)
            if idx is None:
                known = ", ".join(sorted(labels)) or "none"
                raise ProgramError(f"undefined label or function {target!r} (defined: {known})",
                                   insn.origin)
            if not (is_jump(insn) or (insn.code == op.OP_LD_IMM64 and insn.src == op.PSEUDO_FUNC)):
                raise ProgramError(f"instruction {insn!r} cannot take a target", insn.origin)
            delta = slots[idx] - slots[i] - 1
            try:
                if insn.code == op.OP_LD_IMM64:
                    new.imm = delta
                else:
                    set_jump_offset(new, delta)
            except EncodingError as exc:
                raise ProgramError(f"jump to {target!r}: {exc.reason}", insn.origin) from None
            out.append(new)
        self._cache = out
        return out

    # ------------------------------------------------------------ output
    def encode(self) -> bytes:
        """The program as raw instruction bytes (8-byte little-endian slots)."""
        return encode_insns(self.finalize())

    def __iter__(self) -> Iterator[Insn]:
        return iter(self.finalize())

    def __len__(self) -> int:
        """Number of instructions (not slots) after layout."""
        return len(self.finalize())

    @property
    def slot_count(self) -> int:
        """Number of 8-byte slots after layout (``ld_imm64`` takes two), as the kernel counts."""
        return sum(i.slots for i in self.finalize())

    def origins(self) -> list[str | None]:
        """``origin`` per *slot* (the second slot of ld_imm64 repeats the first),
        as the kernel's verifier counts instructions."""
        out: list[str | None] = []
        for insn in self.finalize():
            out.append(insn.origin)
            if insn.code == op.OP_LD_IMM64:
                out.append(insn.origin)
        return out

    def map_refs(self) -> list[str]:
        """Names of the maps the program refers to, in order of first use."""
        seen: dict[str, None] = {}
        for insn in self.finalize():
            if insn.map_ref is not None:
                seen.setdefault(insn.map_ref, None)
        return list(seen)

    def __repr__(self) -> str:
        return f"<Program {self.name!r}: {len(self.insns)} insns, {len(self.subprograms)} subprograms>"


def _successors(insn: Insn, i: int, labels: dict[str, int]) -> list[int] | None:
    """Where control goes after instruction ``i`` of one body (indexes in
    it), None when a jump has a raw offset (its target is not known here)."""
    cls = insn.code & 0x07
    if cls not in (op.JMP, op.JMP32):
        return [i + 1]
    jop = insn.code & 0xF0
    if jop == op.EXIT:
        return []
    if insn.code == op.OP_CALL and insn.src != op.CALL_LOCAL:
        return [i + 1]
    if not is_jump(insn):
        return None                 # an indirect jump: anything may follow
    if insn.code == op.OP_CALL:     # a bpf-to-bpf call returns here
        return [i + 1]
    if insn.target is None:
        return None
    to = labels.get(insn.target)
    if to is None:
        return None
    return [to] if jop == op.JA else [to, i + 1]


def _drop_unreachable(body: Program) -> int:
    """:meth:`Program.drop_unreachable` on one body, its own labels only."""
    insns, labels = body.insns, body._labels
    if any(isinstance(i, RawSlot) for i in insns):
        return 0                    # (raw bytes: not instructions to reason about)
    n = len(insns)
    seen = [False] * n
    todo = [0] if n else []
    while todo:
        i = todo.pop()
        if i >= n or seen[i]:
            continue
        seen[i] = True
        nxt = _successors(insns[i], i, labels)
        if nxt is None:
            return 0
        todo.extend(nxt)
    if all(seen):
        return 0
    new_index = [0] * (n + 1)
    kept: list[Insn] = []
    carried: str | None = None
    for i, insn in enumerate(insns):
        new_index[i] = len(kept)
        if not seen[i]:
            if insn.comment is not None:
                carried = insn.comment if carried is None else f"{carried}; {insn.comment}"
            continue
        if carried is not None:
            insn.comment = carried if insn.comment is None else f"{carried}; {insn.comment}"
            carried = None
        kept.append(insn)
    new_index[n] = len(kept)
    body._comments = {at - n + len(kept): text for at, text in body._comments.items()}
    body.insns = kept
    body._labels = {name: new_index[at] for name, at in labels.items()}
    return n - len(kept)
