"""A terminal step debugger over the VM (``pyebpf vm step FILE``).

The debugger stops before the first instruction and at every breakpoint and
reads commands (one a line; an empty line repeats the last ``step``/``next``)::

    s, step          run one instruction (into calls)
    n, next          run one instruction, over a bpf-to-bpf call
    c, continue      run to the next breakpoint or the end
    b, break WHERE   a breakpoint at an instruction index or a source line
                     (``12``, ``prog.s:7``, ``:7``)
    d, delete WHERE  remove it;  info: list breakpoints
    r, regs          the registers
    stack [N]        the current frame's stack (the N bytes below r10; default 64)
    maps             the maps' entries and records
    w, where         the current instruction, its line and the calls that led here
    q, quit          stop the program
    h, help          this text

    The VM's addresses are its own: the high 32 bits name a region, the
    low 32 the offset in it.  A register that points somewhere is shown
    with the place: stackN[OFF] is offset OFF in frame N's 512-byte stack
    (r10 = stackN[512], so r10 - 8 is stackN[504]), ctx[OFF] the memory r1
    points to at the start, packet[OFF], mem#T[OFF] a map value (region T;
    which map's is said), code[SLOT] an instruction, map#N the N-th map.

At the end of input, the program runs to completion.
"""
from __future__ import annotations

from .errors import VmError
from .memory import FIRST_DYNAMIC, MAPS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TextIO

    from ..isa import Insn
    from .machine import Step, Vm

HELP = (__doc__ or "::").split("::", 1)[1].split("At the end")[0].strip("\n")


class _Quit(Exception):
    """The user quit the debugger."""


class Debugger:
    """Drives ``vm.run`` one instruction at a time, reading commands from
    ``read`` (a ``readline``-like callable returning ``""`` at the end) and
    writing to ``out`` (``echo``: repeating each command there, for input
    that is not a terminal)."""

    def __init__(self, vm: Vm, read: Callable[[], str], out: TextIO, echo: bool = True) -> None:
        self.vm = vm
        self.echo = echo             # write each command after the prompt (input is not a terminal)
        self.read = read
        self.out = out
        self.breakpoints: set[int] = set()
        self._mode = "step"          # step | next | continue | run (no more stops)
        self._depth = 0
        self._last = "step"
        self._texts: dict[int, str] = {}

    # ------------------------------------------------------------ the VM's hooks
    def before(self, pc: int) -> None:
        """Called before each instruction: stop here if asked to."""
        mode = self._mode
        if mode == "run":
            return
        stop = (mode == "step" or pc in self.breakpoints
                or (mode == "next" and self.vm.depth <= self._depth))
        if not stop:
            return
        if pc in self.breakpoints and mode == "continue":
            self.say(f"breakpoint at {pc}")
        self.show(pc)
        self.prompt(pc)

    def __call__(self, step: Step) -> None:
        """Called after each instruction: what changed."""
        quiet = self._mode == "next" and self.vm.depth > self._depth      # inside a call
        if self._mode in ("step", "next") and not quiet and (step.regs or step.writes):
            changes = [f"r{n} = 0x{v:x}{self.place(v)}" for n, v in sorted(step.regs.items())]
            changes += [f"{self.vm.memory.short(a)} = 0x{v:x} ({n} bytes)"
                        for a, n, v in step.writes]
            self.say("    " + ", ".join(changes))

    # ------------------------------------------------------------ commands
    def prompt(self, pc: int) -> None:
        """Read commands until one resumes the program."""
        while True:
            self.out.write("(vm) ")
            self.out.flush()
            line = self.read()
            if self.echo:
                self.out.write(line if line.endswith("\n") or not line else line + "\n")
            if not line:
                self.say("")
                self._mode = "run"
                return
            words = line.split()
            if not words:
                words = [self._last]
            cmd, args = words[0], words[1:]
            try:
                if self.command(cmd, args, pc):
                    return
            except VmError as exc:
                self.say(f"error: {exc.reason}")

    def command(self, cmd: str, args: list[str], pc: int) -> bool:
        """Run one command; True when the program should go on."""
        if cmd in ("s", "step"):
            self._mode = self._last = "step"
            return True
        if cmd in ("n", "next"):
            self._mode = self._last = "next"
            self._depth = self.vm.depth
            return True
        if cmd in ("c", "continue"):
            self._mode = "continue"
            return True
        if cmd in ("q", "quit"):
            raise _Quit
        if cmd in ("b", "break", "d", "delete"):
            if len(args) != 1:
                raise VmError(f"{cmd} takes one place: an instruction index or FILE:LINE")
            slots = self.resolve(args[0])
            if cmd in ("b", "break"):
                self.breakpoints.update(slots)
                self.say(f"breakpoint at {', '.join(map(str, sorted(slots)))}")
            else:
                self.breakpoints.difference_update(slots)
            return False
        if cmd == "info":
            self.say("breakpoints: " + (", ".join(map(str, sorted(self.breakpoints))) or "none"))
        elif cmd in ("r", "regs"):
            self.regs()
        elif cmd == "stack":
            self.stack(int(args[0], 0) if args else 64)
        elif cmd == "maps":
            self.maps()
        elif cmd in ("w", "where"):
            self.where(pc)
        elif cmd in ("h", "help"):
            self.say(HELP)
        else:
            self.say(f"unknown command {cmd!r}; 'help' lists them")
        return False

    def resolve(self, where: str) -> set[int]:
        """The instruction slots of ``12``, ``FILE:LINE`` or ``:LINE``."""
        program = self.vm.program
        if where.isdigit():
            slot = int(where)
            if slot not in program:
                raise VmError(f"there is no instruction at {slot} (0..{max(program)})")
            return {slot}
        path, _, line = where.rpartition(":")
        found = {slot for slot, insn in program.items()
                 if insn.origin and insn.origin.rpartition(":")[2] == line
                 and (not path or insn.origin.rpartition(":")[0].endswith(path))}
        if not found:
            raise VmError(f"no instruction comes from {where!r}")
        return found

    # ------------------------------------------------------------ views
    def say(self, text: str) -> None:
        """Write a line."""
        self.out.write(text + "\n")

    def text(self, insn: Insn) -> str:
        """``insn`` as assembly (cached by instruction: a tail call changes the program)."""
        text = self._texts.get(id(insn))
        if text is None:
            from .machine import insn_text
            text = insn_text(insn)
            self._texts[id(insn)] = text
        return text

    def show(self, pc: int) -> None:
        """The instruction about to run."""
        insn = self.vm.program[pc]
        self.say(f"=> {pc:4}: {self.text(insn):40} {insn.origin or ''}".rstrip())

    def place(self, value: int) -> str:
        """`` (stack0[504])`` when ``value`` is an address the VM made, else ``""``."""
        where = self.pointee(value)
        return f" ({where})" if where is not None else ""

    def pointee(self, value: int) -> str | None:
        """Where the address ``value`` points (``stack0[504]``, ``map#0: counts``,
        ``mem#13[4]: a value of map counts``), or None for a number."""
        memory = self.vm.memory
        where = memory.pointer(value)
        if where is None:
            return None
        tag = value >> 32
        if tag == MAPS:
            names = [str(n) for n, m in self.vm.maps.items() if self.vm.map_address(m) == value]
            return f"{where}: {names[0]}" if names else where
        if tag >= FIRST_DYNAMIC:
            return f"{where}: {memory.names[tag]}"
        return where

    def regs(self) -> None:
        """Print the registers, then where those that are addresses point."""
        R = self.vm.R
        for row in range(0, 11, 4):
            self.say("  ".join(f"r{n:<2}= 0x{R[n]:016x}" for n in range(row, min(row + 4, 11))))
        places = [(n, self.pointee(R[n])) for n in range(11)]
        pointers = [f"r{n} -> {where}" for n, where in places if where is not None]
        if pointers:
            self.say("addresses: " + ", ".join(pointers))

    def stack(self, size: int) -> None:
        """Print ``size`` bytes below r10, 8 a line."""
        frame = self.vm.depth
        data = self.vm.stack(frame)
        size = max(8, min(size, len(data)))
        for off in range(-size, 0, 8):
            chunk = data[len(data) + off:len(data) + off + 8]
            self.say(f"  r10{off:+5d}: {chunk.hex(' ')}  0x{int.from_bytes(chunk, 'little'):x}")

    def maps(self) -> None:
        """Print every map's entries and records."""
        if not self.vm.maps:
            self.say("no maps")
        for name, m in self.vm.maps.items():
            self.say(f"{name}: {m!r}")
            for key, value in m.items():
                self.say(f"  {key!r}: {value!r}")
            for record in m.records:
                self.say(f"  record {record!r}")

    def where(self, pc: int) -> None:
        """The current instruction and the calls that led to it."""
        self.show(pc)
        for slot, insn in reversed(self.vm.callers()):
            text = self.text(insn) if insn is not None else "?"
            origin = insn.origin if insn is not None else None
            self.say(f"   called from {slot:4}: {text:28} {origin or ''}".rstrip())


def debug(vm: Vm, mem: bytes | None, read: Callable[[], str], out: TextIO,
          breakpoints: list[str] | None = None, echo: bool = True) -> int | None:
    """Run ``vm`` under the debugger; r0, or None if the user quit."""
    dbg = Debugger(vm, read, out, echo)
    for where in breakpoints or ():
        dbg.breakpoints.update(dbg.resolve(where))
    try:
        r0 = vm.run(mem if mem is not None else b"", trace=dbg)
    except _Quit:
        return None
    return r0
