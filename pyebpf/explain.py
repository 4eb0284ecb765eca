"""The verifier's view: what the kernel's verifier thought at each instruction.

:func:`explain` loads a program with the verifier's full log (log level 2
and its statistics), :func:`parse_log` reads that log (the kernel 6.18
format: ``N: (op) insn ; R1=... fp-8=...`` state lines, ``N: STATE`` lines,
``from X to Y: STATE`` branch lines, ``caller:``/``callee:`` frames, the
error line and the ``processed N insns`` statistics), and the
:class:`Explanation` it returns prints each instruction beside the source
line that emitted it (Python or ``.s``) and the verifier's register and
stack state there.  For a rejection it prints the path the verifier walked
to the failing instruction -- branch by branch, through subprogram calls --
with the failing instruction marked ``-->`` (as :func:`dis.dis` does).

::

    from pyebpf.explain import explain
    print(explain(program, "socket_filter"))        # a Program, text or bytes
    print(explain_error(err, program))               # a VerifierError already caught

The log is parsed in one pass with string operations (no regular
expression per line), so the log of a program that reaches the verifier's
1,000,000-instruction limit is read in seconds.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping

    from .isa import Insn
    from .program import Program

from .errors import VerifierError
from .loader import _as_program, load

__all__ = ["Step", "VerifierLog", "Explanation", "parse_log", "explain", "explain_error",
           "split_state"]

#: log level of :func:`explain`: every instruction's state (2) and the statistics (4)
LOG_LEVEL = 2 | 4

#: lines of the log that are the verifier's bookkeeping, not the walk (``(0) ...``: stack liveness)
_NOISE = ("mark_precise:", "frame ", "Live regs before insn:", "SCC enter", "SCC exit", "(",
          "caller:", "callee:", "returning from callee:", "func#", "propagating ",
          "last_idx ", "parent ", "regs=")
_STATS = ("verification time ", "stack depth ", "processed ")


class Step:
    """One instruction the verifier walked, in the order of its log.

    ``index`` is the instruction's slot index, ``frame`` the call depth (0:
    the main program), ``text`` the instruction as the verifier printed it,
    ``state`` the registers and stack slots it changed or read after the
    instruction (``R0=1 R1=scalar(...) fp-8=...``; empty when it printed
    none), ``entry`` the full state the verifier printed before it (at the
    start of a branch, after a call or a back-tracking pass), ``prev`` the
    position in :attr:`VerifierLog.steps` of the step before it on its path
    (-1 for the first), and ``branch`` the ``(from, to)`` of the branch
    this step starts, if it starts one.
    """

    __slots__ = ("index", "frame", "text", "state", "entry", "prev", "branch")

    def __init__(self, index: int, frame: int, text: str, state: str, entry: str,
                 prev: int, branch: tuple[int, int] | None) -> None:
        self.index = index
        self.frame = frame
        self.text = text
        self.state = state
        self.entry = entry
        self.prev = prev
        self.branch = branch

    def registers(self) -> dict[str, str]:
        """:attr:`state` as ``{"R0": "1", "fp-8": "scalar(...)"}``."""
        return split_state(self.state)

    def __repr__(self) -> str:
        return f"<Step {self.index}: {self.text} ; {self.state}>"


def split_state(state: str) -> dict[str, str]:
    """A verifier state string (``frame1: R0=1 R1=scalar(smin=0,var_off=(0x0; 0xf))
    fp-8=mmmmmmmm``) as ``{name: value}``, the ``frameN:`` prefix dropped;
    spaces inside parentheses do not split."""
    out: dict[str, str] = {}
    if state.startswith("frame"):
        state = state.partition(": ")[2]
    depth = 0
    start = 0
    n = len(state)
    for i in range(n + 1):
        c = state[i] if i < n else " "
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == " " and depth <= 0:
            item = state[start:i]
            start = i + 1
            if item:
                name, eq, value = item.partition("=")
                out[name] = value if eq else ""
    return out


class VerifierLog:
    """A parsed verifier log: :attr:`steps` in the log's order, the error
    line (:attr:`error`, None for an accepted program), the subprograms'
    first slots (:attr:`functions`) and the statistics (:attr:`stats`:
    ``processed``, ``total_states``, ``peak_states``,
    ``max_states_per_insn``, ``verification_time_usec``...)."""

    def __init__(self, steps: list[Step], error: str | None, functions: dict[int, int],
                 stats: dict[str, int]) -> None:
        self.steps = steps
        self.error = error
        self.functions = functions
        self.stats = stats

    def path(self, end: int | None = None) -> list[Step]:
        """The steps that led to step ``end`` (default: the last one, where a
        rejected program failed), first to last: branch after branch, back to
        the first instruction."""
        steps = self.steps
        if not steps:
            return []
        k = len(steps) - 1 if end is None else end
        out: list[Step] = []
        while k >= 0:
            out.append(steps[k])
            k = steps[k].prev
        out.reverse()
        return out

    def visits(self) -> dict[int, list[Step]]:
        """The steps of each instruction (slot index), in the log's order."""
        out: dict[int, list[Step]] = {}
        for s in self.steps:
            out.setdefault(s.index, []).append(s)
        return out


def _frame_of(state: str) -> int:
    if state.startswith("frame"):
        head = state[5:state.find(":")]
        if head.isdigit():
            return int(head)
    return 0


def parse_log(log: str) -> VerifierLog:
    """Parse a verifier log (any log level; level 2 has a state at every
    instruction) into a :class:`VerifierLog`.  Lines it does not know are
    skipped; the text after the last instruction that is not a statistic is
    the error.

    Paths: the verifier walks one path to an ``exit``, then resumes a
    branch it left for later (``from X to Y:``), last left first.  Each
    conditional jump the walk passes is a candidate; a ``from X to Y`` takes
    the latest candidate at ``X`` and drops the ones after it (they did not
    leave a branch, or theirs were taken already), so :meth:`VerifierLog.path`
    follows the walk that really led to a step.
    """
    steps: list[Step] = []
    append = steps.append
    pending: list[int] = []          # positions of conditional jumps that may have left a branch
    functions: dict[int, int] = {}
    stats: dict[str, int] = {}
    tail: list[str] = []             # unknown lines since the last instruction
    frame = 0
    prev = -1
    entry = ""
    entry_index = -1
    branch: tuple[int, int] | None = None
    returning = False                # inside a 'returning from callee' block
    for line in log.splitlines():
        if not line:
            continue
        c = line[0]
        if c == "m" or c == " " or c == "(":      # mark_precise, tables, liveness: most lines
            continue
        if "0" <= c <= "9":
            colon = line.find(": ")
            head = line[:colon] if colon > 0 else ""
            if not head.isdigit():
                tail.append(line)
                continue
            index = int(head)
            rest = line[colon + 2:]
            if rest[:1] == "(" and rest[3:5] == ") ":
                body = rest[5:]
                cut = body.find(" ; ")
                if cut >= 0:
                    text, state = body[:cut].rstrip(), body[cut + 3:].strip()
                    frame = _frame_of(state) if state[:1] == "f" else 0
                else:
                    text, state = body.rstrip(), ""
                append(Step(index, frame, text, state, entry if entry_index == index else "",
                            prev, branch))
                prev = len(steps) - 1
                if text.startswith("if ") or text.startswith("may_goto"):
                    pending.append(prev)
                entry, entry_index, branch = "", -1, None
                tail.clear()
            else:                    # 'N: STATE' before the instruction N
                entry, entry_index = rest.strip(), index
                frame = _frame_of(entry)
            continue
        if c == "f" and line.startswith("from ") and " to " in line:
            head, _, state = line[5:].partition(": ")
            x, _, y = head.partition(" to ")
            if not (x.isdigit() and y.isdigit()):
                tail.append(line)
                continue
            xi, yi = int(x), int(y)
            entry, entry_index = state.strip(), yi
            frame = _frame_of(entry)
            branch = (xi, yi)
            if returning:            # back from a subprogram: the same walk goes on
                returning = False
                continue
            prev = -1
            for k in range(len(pending) - 1, -1, -1):
                if steps[pending[k]].index == xi:
                    prev = pending[k]
                    del pending[k:]
                    break
            continue
        if line.startswith("to caller at "):
            returning = True
            continue
        if line.startswith("func#"):
            num, _, at = line[5:].partition(" @")
            if num.isdigit() and at.strip().isdigit():
                functions[int(num)] = int(at)
            continue
        if line.startswith(_STATS):
            _stat(line, stats)
            continue
        if c == " " or c == "\t" or line.startswith(_NOISE):
            continue
        tail.append(line)
    error = "\n".join(tail).strip() or None
    return VerifierLog(steps, error, functions, stats)


def _stat(line: str, stats: dict[str, int]) -> None:
    words = line.split()
    if line.startswith("verification time ") and len(words) > 2 and words[2].isdigit():
        stats["verification_time_usec"] = int(words[2])
    elif line.startswith("stack depth "):
        total = 0
        for part in words[2:]:
            for n in part.split("+"):
                if n.isdigit():
                    total += int(n)
        stats["stack_depth"] = total
    elif line.startswith("processed "):
        if len(words) > 1 and words[1].isdigit():
            stats["processed"] = int(words[1])
        for i, w in enumerate(words[:-1]):
            if w in ("max_states_per_insn", "total_states", "peak_states", "mark_read") \
                    and words[i + 1].isdigit():
                stats[w] = int(words[i + 1])


class Explanation:
    """A program and what the verifier thought of it.

    :attr:`insns` are the program's instructions (they know their source
    lines), :attr:`log` the verifier's log and :attr:`parsed` its
    :class:`VerifierLog`; :attr:`error` is the :class:`VerifierError` of a
    rejection (None when the program was accepted).  ``str()`` is
    :meth:`text`.
    """

    def __init__(self, insns: list[Insn], log: str, error: VerifierError | None = None) -> None:
        self.insns = insns
        self.log = log
        self.error = error
        self.parsed = parse_log(log)

    @property
    def accepted(self) -> bool:
        """True when the verifier accepted the program."""
        return self.error is None

    def __str__(self) -> str:
        return self.text()

    def text(self, limit: int | None = 200, visits: int = 3) -> str:
        """For people.  An accepted program: each instruction in program
        order under its source line, with the verifier's state after it --
        one line per distinct state, at most ``visits`` of them (a loop's
        body is walked once per iteration).  A rejection: the verifier's
        complaint, then the path to the failing instruction (its last
        ``limit`` steps; None: all of them), the failing one marked ``-->``
        with the state the verifier had before it."""
        if self.error is not None:
            return self._rejection(limit)
        return self._listing(visits)

    # -- the pieces
    def _slots(self) -> dict[int, Insn]:
        out: dict[int, Insn] = {}
        slot = 0
        for insn in self.insns:
            out[slot] = insn
            slot += insn.slots
        return out

    def _stats_line(self) -> str:
        st = self.parsed.stats
        if "processed" not in st:
            return ""
        parts = [f"processed {st['processed']} instructions"]
        if "total_states" in st:
            parts.append(f"{st['total_states']} states (peak {st.get('peak_states', 0)})")
        if "verification_time_usec" in st:
            parts.append(f"{st['verification_time_usec']} us")
        return "verifier: " + ", ".join(parts)

    def _listing(self, visits: int) -> str:
        by_slot = self._slots()
        seen = self.parsed.visits()
        starts = {at: n for n, at in self.parsed.functions.items() if n}
        width = len(str(max(by_slot, default=0)))
        lines: list[str] = []
        steps = self.parsed.steps
        if steps and steps[0].entry:
            lines.append(f"on entry: {steps[0].entry}")
        last_origin: str | None = None
        for slot, insn in by_slot.items():
            if slot in starts:
                lines.append(f"subprogram #{starts[slot]} (slot {slot}):")
            origin = insn.origin
            if origin is not None and origin != last_origin:
                lines.append(f"    # {_source_line(origin)}")
            last_origin = origin
            mine = seen.get(slot, [])
            text = _text(insn, mine[0].text if mine else None)
            head = f"    {slot:{width}d}: {text}"
            states: list[str] = []
            for s in mine:
                if s.state and s.state not in states:
                    states.append(s.state)
            if not mine:
                lines.append(f"{head:<44} ; (not walked: unreachable, or pruned as safe)")
                continue
            note = f"  [walked {len(mine)}x]" if len(mine) > 1 else ""
            lines.append(f"{head:<44} ; {states[0] if states else '(none printed)'}{note}")
            pad = " " * 44
            for st in states[1:visits]:
                lines.append(f"{pad} ; {st}")
            if len(states) > visits:
                lines.append(f"{pad} ; ... {len(states) - visits} more states")
        tail = self._stats_line()
        if tail:
            lines.append(tail)
        return "\n".join(lines) + "\n"

    def _rejection(self, limit: int | None) -> str:
        err = self.error
        assert err is not None
        by_slot = self._slots()
        path = self.parsed.path()
        lines = [err.summary]
        if not path:
            lines.append("(the verifier's log shows no instruction)")
            return "\n".join(lines) + "\n"
        lines.append(f"the verifier's path to the failing instruction ({len(path)} steps):")
        shown = path if limit is None or len(path) <= limit else path[-limit:]
        if len(shown) < len(path):
            lines.append(f"    ... {len(path) - len(shown)} earlier steps "
                         f"(all of them: limit=None, or --all)")
        width = len(str(max(by_slot, default=0)))
        last_origin: str | None = None
        failing = len(shown) - 1
        for k, s in enumerate(shown):
            if s.branch is not None:
                lines.append(f"    from {s.branch[0]} to {s.branch[1]}:"
                             + (f" {s.entry}" if s.entry else ""))
            insn = by_slot.get(s.index)
            origin = insn.origin if insn is not None else None
            if origin is not None and origin != last_origin:
                lines.append(f"    # {_source_line(origin)}")
            last_origin = origin
            mark = "--> " if k == failing else "    "
            head = f"{mark}{s.index:{width}d}: {_text(insn, s.text)}"
            if k == failing:
                lines.append(head)
                if s.entry:
                    lines.append(f"        state before it: {s.entry}")
                said = (self.parsed.error or err.message).replace("\n", "\n" + " " * 22)
                lines.append(f"        the verifier: {said}")
            else:
                lines.append(f"{head:<44} ; {s.state}" if s.state else head)
        tail = self._stats_line()
        if tail:
            lines.append(tail)
        return "\n".join(lines) + "\n"


def _source_line(origin: str) -> str:
    """``file:line`` and, when the file can be read, that line's text (a
    Python program's line says more than its instruction; a text file's
    line has its spelling, its map names and its comment)."""
    path, _, num = origin.rpartition(":")
    if not num.isdigit():
        return origin
    import linecache
    text = linecache.getline(path, int(num)).strip()
    return f"{origin}: {text}" if text else origin


def _text(insn: Insn | None, printed: str | None) -> str:
    """An instruction's text: the verifier's, except for a map reference
    (the verifier prints the kernel's pointer; the map's name says more)."""
    if insn is not None and (printed is None or insn.map_ref is not None):
        return _format(insn)
    return printed or "?"


def _format(insn: Insn) -> str:
    from .text import format_insn
    try:
        return format_insn(insn, dialect="llvm", style="verifier")
    except Exception:                # a raw slot: still show where it is
        return repr(insn)


def explain(source: "Program | str | bytes | Iterable[Insn]", prog_type: "str | int" = "socket_filter",
            *, maps: Mapping[str, Any] | None = None, dialect: str = "llvm",
            **load_args: Any) -> Explanation:
    """Load ``source`` (a :class:`~pyebpf.program.Program`, assembly text in
    ``dialect``, raw bytes or instructions) with the verifier's full log,
    close it again, and return the :class:`Explanation` -- accepted or
    rejected (a rejection is no exception here: it is what is explained).
    ``maps`` and ``load_args`` go to :func:`pyebpf.loader.load`."""
    program, insns = _as_program(source, dialect)
    try:
        loaded = load(program if program is not None else insns, prog_type, maps=maps,
                      log_level=LOG_LEVEL, **load_args)
    except VerifierError as err:
        return Explanation(insns, err.log, err)
    with loaded:
        return Explanation(insns, loaded.log)


def explain_error(error: VerifierError,
                  source: "Program | str | bytes | Iterable[Insn] | None" = None,
                  dialect: str = "llvm") -> Explanation:
    """The :class:`Explanation` of a :class:`VerifierError` already caught;
    ``source`` (the program that was loaded) gives the source lines.  A
    default load keeps the log at level 1 (states at branches only): for the
    state at every instruction, call :func:`explain` with the program."""
    insns: list[Insn] = [] if source is None else _as_program(source, dialect)[1]
    return Explanation(insns, error.log, error)
