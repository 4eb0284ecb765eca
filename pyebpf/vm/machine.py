"""The :class:`Vm`: runs an eBPF program in pure Python, with no kernel.

>>> from pyebpf.text import assemble
>>> from pyebpf.vm import Vm
>>> Vm(assemble("r0 = r2\\nr0 *= 7\\nexit")).run(b"\\x01\\x02")  # r1 = &mem, r2 = len(mem)
14

The program is decoded and translated to Python once (:mod:`.translate`);
each run resets the registers, the stack and the context, then loops over
basic blocks until the last frame exits.  Memory is checked
(:mod:`.memory`); helpers are emulated (:mod:`.helpers`); maps are
:class:`~pyebpf.vm.maps.VmMap` objects built from the same specs the kernel
maps use.
"""
from __future__ import annotations

from ..errors import OptionError
from ..isa import Insn, decode, opcodes as op
from . import memory as mem_
from . import semantics as sem
from .errors import VmError
from .maps import VmMap
from .memory import CODE, CTX, MAPS, MAX_FRAMES, PACKET, STACK0, STACK_SIZE, Memory
from .translate import Unit, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn

M64 = 0xFFFFFFFFFFFFFFFF
MAX_TAIL_CALLS = 33          # the kernel's MAX_TAIL_CALL_CNT
MAY_GOTO_BUDGET = 8 << 20    # the kernel's BPF_MAX_LOOPS
DEFAULT_MAX_STEPS = 50_000_000


class _TailCall(Exception):
    """Go on in another program's code at ``pc``: a tail call (pc 0), or the
    return from a tail-called program to the subprogram call that led there."""

    def __init__(self, code: "_Code", pc: int = 0) -> None:
        self.code = code
        self.pc = pc


class _Abort(Exception):
    """A legacy packet load out of the packet: the program ends with r0 = 0."""


class Step:
    """One executed instruction, as a tracer sees it: ``index`` (slot),
    ``insn``, ``regs`` (register number -> new value, for those it changed)
    and ``writes`` ((address, size, value) of each memory store)."""

    __slots__ = ("index", "insn", "regs", "writes")

    def __init__(self, index: int, insn: Insn, regs: dict[int, int],
                 writes: list[tuple[int, int, int]]) -> None:
        self.index = index
        self.insn = insn
        self.regs = regs
        self.writes = writes

    def __repr__(self) -> str:
        return f"<Step {self.index}: regs {self.regs} writes {self.writes}>"


class _Code:
    """One program's instructions by slot and its translations."""

    def __init__(self, insns: list[Insn]) -> None:
        self.by_slot: dict[int, Insn] = {}
        slot = 0
        for insn in insns:
            self.by_slot[slot] = insn
            slot += insn.slots
        self.nslots = slot
        self.units: dict[bool, Unit] = {}


def _instructions(program: Any) -> tuple[list[Insn], dict[str, Any]]:
    """The instructions and named maps of a Program, instruction list or bytes."""
    if isinstance(program, (bytes, bytearray, memoryview)):
        return decode(program), {}
    finalize = getattr(program, "finalize", None)
    if finalize is not None:
        return list(finalize()), dict(getattr(program, "maps", {}) or {})
    insns = list(program)
    if not all(isinstance(i, Insn) for i in insns):
        raise VmError("a program is a Program, a list of Insn or instruction bytes, "
                      f"not {type(program).__name__}")
    return insns, {}


class Vm:
    """An eBPF virtual machine for one program.

    Args:
        program: a :class:`~pyebpf.program.Program`, a list of
            :class:`~pyebpf.isa.Insn`, or instruction bytes.
        maps: name (or, for raw bytes, fd number) -> a map description
            (``MapSpec``, a map object, a :class:`VmMap`); the program's own
            ``Program.maps`` are used for names not given.
        max_steps: stop with :class:`VmError` after this many instructions.
        strict_alignment: check the alignment of every access (by default
            only the stack and atomics, as the verifier does on x86).
        cpu, ncpus: what ``get_smp_processor_id`` says and per-CPU maps hold.
        pid, tgid, uid, gid, comm: what the ``get_current_*`` helpers say.
        user_memory: address -> bytes that ``probe_read_*`` can read.
        helpers: helper id -> ``fn(vm, insn_index, r1, r2, r3, r4, r5) -> r0``,
            added to (or replacing) the emulated ones.
    """

    def __init__(self, program: Any, maps: dict[Any, Any] | None = None, *,
                 max_steps: int = DEFAULT_MAX_STEPS, strict_alignment: bool = False,
                 cpu: int = 0, ncpus: int = 1, pid: int = 1000, tgid: int = 1000,
                 uid: int = 0, gid: int = 0, comm: bytes | str = b"pyebpf-vm",
                 user_memory: dict[int, bytes] | None = None,
                 helpers: dict[int, Callable[..., int]] | None = None) -> None:
        from .helpers import EMULATED
        insns, own_maps = _instructions(program)
        self.max_steps = max_steps
        self.cpu, self.ncpus = cpu, ncpus
        self.pid, self.tgid, self.uid, self.gid = pid, tgid, uid, gid
        self.comm = comm.encode() if isinstance(comm, str) else bytes(comm)
        self.user_memory: dict[int, bytes] = dict(user_memory or {})
        self.ktime: Callable[[], int] | None = None   #: a clock for ktime_get_ns (default: monotonic)
        self.random: Any = None                       #: a random.Random for get_prandom_u32
        self.helpers: dict[int, Callable[..., int]] = dict(EMULATED)
        self.helpers.update(helpers or {})
        #: lines written by ``bpf_trace_printk``
        self.printk: list[str] = []
        #: instructions executed by the last run
        self.steps = 0
        self.R: list[int] = [0] * 11
        self.memory = Memory(self._fault)
        self._frames: list[tuple[int, int, int, int, int, int]] = []
        self._ptrs: dict[int, int] = {}
        self._reserved: dict[int, tuple[VmMap, bytearray, int]] = {}
        self._step = False
        #: how many may_goto's fall through in a run before they jump (the kernel's 8M)
        self.may_goto_budget = MAY_GOTO_BUDGET
        self._may_goto = MAY_GOTO_BUDGET
        self._tail_calls = 0
        # (depth, code): a tail call from a subprogram at that depth; when the
        # program it reached exits there, the run goes on in ``code``
        self._tails: list[tuple[int, _Code]] = []
        self.maps: dict[Any, VmMap] = {}
        self._map_list: list[VmMap] = []
        for name, spec in {**own_maps, **(maps or {})}.items():
            self.add_map(name, spec)
        self._strict = strict_alignment
        self._names = self._runtime()
        self._main = _Code(insns)
        self._running = self._main
        self._other: dict[int, _Code] = {}

    # ------------------------------------------------------------ maps and pointers
    def add_map(self, name: Any, spec: Any) -> VmMap:
        """Give the program the map ``name`` (a spec, map or VmMap); returns the VmMap."""
        vm_map = VmMap.of(spec, self.ncpus)
        self.maps[name] = vm_map
        if all(m is not vm_map for m in self._map_list):
            self._map_list.append(vm_map)
        return vm_map

    def map_address(self, vm_map: VmMap) -> int:
        """The value a map reference (``ld_imm64`` src 1) puts in a register."""
        for i, m in enumerate(self._map_list):
            if m is vm_map:
                return mem_.address(MAPS, i)
        self._map_list.append(vm_map)
        return mem_.address(MAPS, len(self._map_list) - 1)

    def map_at(self, addr: int, insn: int) -> VmMap:
        """The map a register holds (a map helper's first argument)."""
        if addr >> 32 == MAPS and (addr & 0xFFFFFFFF) < len(self._map_list):
            return self._map_list[addr & 0xFFFFFFFF]
        self._fault(insn, f"0x{addr:x} is not a map (load one with an ld_imm64 map reference)")

    def pointer(self, buf: bytearray, name: str) -> int:
        """The address of ``buf`` (a map value...), giving it a region on first use."""
        addr = self._ptrs.get(id(buf))
        if addr is not None and self.memory.regions[addr >> 32] is buf:
            return addr
        addr = self.memory.add(buf, name)
        self._ptrs[id(buf)] = addr
        return addr

    def _constant(self, code: _Code) -> Callable[[int, Insn], int]:
        def constant(slot: int, insn: Insn) -> int:
            src = insn.src
            if src == op.PSEUDO_FUNC:
                return mem_.address(CODE, slot + 1 + insn.imm)
            if src == op.PSEUDO_BTF_ID:
                self._fault(slot, "ld_imm64 of a kernel variable (BTF id) needs the kernel", code)
            vm_map = self._map_for(slot, insn, code)
            if src in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_IDX):
                return self.map_address(vm_map)
            if not vm_map.is_array:
                self._fault(slot, f"map_value of map {vm_map.name!r}: only array maps have a "
                            "direct value address", code)
            buf = vm_map.lookup(b"\0\0\0\0")
            if buf is None:
                self._fault(slot, f"map {vm_map.name!r} has no element 0", code)
            return self.pointer(buf, f"the value of {vm_map.name}[0]") + (insn.next_imm or 0)
        return constant

    def _map_for(self, slot: int, insn: Insn, code: _Code) -> VmMap:
        name = insn.map_ref
        if name is not None:
            found = self.maps.get(name)
            if found is None:
                self._fault(slot, f"map {name!r} was not given to the VM (maps={{{name!r}: ...}}; "
                            f"given: {', '.join(map(str, self.maps)) or 'none'})", code)
            return found
        if insn.src in (op.PSEUDO_MAP_IDX, op.PSEUDO_MAP_IDX_VALUE):
            if 0 <= insn.imm < len(self._map_list):
                return self._map_list[insn.imm]
            self._fault(slot, f"map index {insn.imm}: the VM has {len(self._map_list)} maps", code)
        found = self.maps.get(insn.imm)
        if found is None:
            self._fault(slot, f"map fd {insn.imm} was not given to the VM (maps={{{insn.imm}: ...}})",
                        code)
        return found

    # ------------------------------------------------------------ errors
    def _fault(self, slot: int, message: str, code: _Code | None = None) -> NoReturn:
        insn = (code or self._running).by_slot.get(slot)
        text = None
        if insn is not None:
            text = insn_text(insn)
        raise VmError(message, slot, text, insn.origin if insn is not None else None)

    # ------------------------------------------------------------ what translated code calls
    def _runtime(self) -> dict[str, Any]:
        R = self.R
        frames = self._frames
        memory = self.memory
        regions = memory.regions
        fault = self._fault
        helpers = self.helpers
        tails = self._tails
        stack_tag = memory.stack_tag

        def call(target: int, ret: int, slot: int) -> int:
            depth = len(frames) + 1
            # the limit is per program: a tail-called one starts at the depth it was reached
            if depth - (tails[-1][0] if tails else 0) >= MAX_FRAMES:
                fault(slot, f"call depth over {MAX_FRAMES} frames (the kernel's limit)")
            frames.append((ret, R[6], R[7], R[8], R[9], R[10]))
            tag = STACK0 + depth if depth < MAX_FRAMES else stack_tag(depth)
            regions[tag] = bytearray(STACK_SIZE)
            R[10] = (tag << 32) + STACK_SIZE
            return target

        def exit_(slot: int) -> int:
            if not frames:
                return -1
            depth = len(frames)
            regions[STACK0 + depth if depth < MAX_FRAMES else stack_tag(depth)] = None  # gone
            ret, R[6], R[7], R[8], R[9], R[10] = frames.pop()
            if tails and tails[-1][0] == depth:     # a tail-called program returns
                raise _TailCall(tails.pop()[1], ret)
            return ret

        def helper(n: int, slot: int) -> int:
            fn = helpers.get(n)
            if fn is None:
                from .helpers import unknown
                unknown(self, n, slot)
            return fn(self, slot, R[1], R[2], R[3], R[4], R[5]) & M64

        def code_target(value: int, slot: int, what: str) -> int:
            target = value & 0xFFFFFFFF
            blocks = self._running.units[self._step].blocks
            if value >> 32 != CODE or target >= len(blocks) or blocks[target] is None:
                fault(slot, f"{what} 0x{value:x}: not the address of a function "
                      "(ld_imm64 src 4)")
            return target

        def callx(value: int, ret: int, slot: int) -> int:
            if value >> 32 == CODE:
                return call(code_target(value, slot, "callx"), ret, slot)
            if value >> 32:
                fault(slot, f"callx 0x{value:x}: neither a function address nor a helper id")
            R[0] = helper(value, slot)
            return ret

        def gotox(value: int, slot: int) -> int:
            return code_target(value, slot, "gotox")

        def may_goto() -> bool:
            if self._may_goto <= 0:
                return True
            self._may_goto -= 1
            return False

        def ldpkt(where: int, size: int, slot: int) -> int:
            buf = regions[PACKET]
            if buf is None:
                buf = regions[CTX]
            where &= 0xFFFFFFFF
            if where >= 0x80000000 or buf is None or where + size > len(buf):
                raise _Abort
            return int.from_bytes(buf[where:where + size], "big")

        def bad(slot: int, reason: str) -> int:
            fault(slot, f"invalid instruction: {reason}")

        def jumpout(slot: int, target: int) -> int:
            fault(slot, f"jump to slot {target}: outside the program (0..{self._running.nslots - 1}) "
                  "or into the middle of an ld_imm64")

        names: dict[str, Any] = dict(sem.RUNTIME)
        names.update(memory.accessors(self._strict))
        for imm, (name, tmpl, _) in sem.ATOMICS.items():
            if name in ("add", "or", "and", "xor", "xchg"):
                names[f"A_{name}"] = eval(f"lambda m, s: {tmpl.format(m='m', s='s')}")  # noqa: S307 - our table
        names.update(R=R, CALL=call, EXIT=exit_, HELPER=helper, CALLX=callx, GOTOX=gotox,
                     MAYGOTO=may_goto, LDPKT=ldpkt, BAD=bad, JUMPOUT=jumpout)
        return names

    def _unit(self, code: _Code, step: bool) -> Unit:
        unit = code.units.get(step)
        if unit is None:
            pairs = sorted(code.by_slot.items())
            unit = translate(pairs, code.nslots, self._constant(code), step)
            unit.bind(self._names, f"<pyebpf.vm {'step' if step else 'block'}>")
            code.units[step] = unit
        return unit

    def source(self, step: bool = False) -> str:
        """The Python the program was translated to (for the curious)."""
        return self._unit(self._main, step).source

    # ------------------------------------------------------------ tail calls
    def tail_target(self, program: Any) -> _Code:
        """The code of a program stored in a program array (translated once)."""
        key = id(program)
        code = self._other.get(key)
        if code is None:
            insns, own = _instructions(program)
            for name, spec in own.items():
                if name not in self.maps:
                    self.add_map(name, spec)
            code = self._other[key] = _Code(insns)
        return code

    def tail_call(self, program: Any, slot: int) -> NoReturn:
        """Called by the tail-call helper: jump to ``program`` (does not return).

        As in the kernel, the program replaces the running frame: from a
        subprogram, its exit returns to that subprogram's caller; the caller
        frames stay (so nesting can go past 8 frames: the limit is each
        program's own).  The count (:data:`MAX_TAIL_CALLS`) is per run,
        across frames, as in the kernel since 6.10.  The verifier's static
        rules for mixing the two -- a subprogram that tail-calls may have at
        most 256 bytes of stack in the frames above it -- are not checked.
        """
        depth = len(self._frames)
        if depth and not (self._tails and self._tails[-1][0] == depth):
            self._tails.append((depth, self._running))
        self._tail_calls += 1
        raise _TailCall(self.tail_target(program))

    # ------------------------------------------------------------ running
    def run(self, mem: bytes | bytearray | None = None, *, ctx: bytes | bytearray | None = None,
            packet: bytes | bytearray | None = None,
            trace: Callable[[Step], None] | None = None) -> int:
        """Run the program once and return ``r0``.

        ``mem``: the uBPF/bpf_conformance convention, ``r1`` = its address and
        ``r2`` = its length.  ``ctx``: the context, ``r1`` = its address.
        ``packet``: what the legacy packet loads read (default: mem/ctx).
        ``trace``: called with a :class:`Step` after every instruction; if it
        has a ``before(index)`` method, that is called before each one (the
        step debugger stops there).
        Memory given is copied; read the results from :meth:`region`,
        :attr:`R`, :meth:`stack` and the maps.
        """
        for name, given in (("mem", mem), ("ctx", ctx), ("packet", packet)):
            if given is not None and not isinstance(given, (bytes, bytearray, memoryview)):
                raise OptionError(f"run({name}=...) takes bytes, not {type(given).__name__}")
        R = self.R
        R[:] = [0] * 11
        regions = self.memory.regions
        data = ctx if ctx is not None else mem
        regions[CTX] = bytearray(data) if data is not None else None
        regions[PACKET] = bytearray(packet) if packet is not None else None
        if data is not None:
            R[1] = CTX << 32
        if ctx is None and mem is not None:
            R[2] = len(mem)
        for n in range(MAX_FRAMES):
            regions[STACK0 + n] = None
        for tag in self.memory.deep_stacks():
            regions[tag] = None
        regions[STACK0] = bytearray(STACK_SIZE)
        R[10] = (STACK0 << 32) + STACK_SIZE
        self._frames.clear()
        self._reserved.clear()
        self._may_goto = self.may_goto_budget
        self._tail_calls = 0
        self._tails.clear()
        self._running = self._main
        self._step = trace is not None
        self.steps = 0
        try:
            self._loop(trace)
        except _Abort:
            R[0] = 0
        finally:
            self._drop_reservations()
        return R[0]

    def _drop_reservations(self) -> None:
        """Discard the ring-buffer records a run reserved and never submitted
        (the verifier would refuse such a program), so no busy record blocks
        the ring's reader."""
        for m, _buf, pos in self._reserved.values():
            m.ring.commit(pos, b"", discard=True)  # type: ignore[union-attr]
        self._reserved.clear()

    def _loop(self, trace: Callable[[Step], None] | None) -> None:
        code = self._main
        pc = 0
        while True:
            self._running = code
            unit = self._unit(code, trace is not None)
            if not code.nslots:
                self._fault(0, "the program is empty (no exit)")
            try:
                if trace is None:
                    self._blocks(unit, pc)
                else:
                    self._traced(unit, pc, trace)
                return
            except _TailCall as tc:
                code, pc = tc.code, tc.pc

    def _blocks(self, unit: Unit, pc: int) -> None:
        blocks, lengths = unit.blocks, unit.lengths
        n = self.steps
        limit = self.max_steps
        try:
            while pc >= 0:
                n += lengths[pc]
                if n > limit:
                    self._too_many(pc)
                pc = blocks[pc]()  # type: ignore[misc]
        finally:
            self.steps = n

    def _traced(self, unit: Unit, pc: int, trace: Callable[[Step], None]) -> None:
        blocks = unit.blocks
        R = self.R
        memory = self.memory
        by_slot = self._running.by_slot
        hook = getattr(trace, "before", None)
        try:
            while pc >= 0:
                if hook is not None:
                    hook(pc)
                self.steps += 1
                if self.steps > self.max_steps:
                    self._too_many(pc)
                before = R[:]
                writes: list[tuple[int, int, int]] = []
                memory.writes = writes
                here = pc
                pc = blocks[pc]()  # type: ignore[misc]
                changed = {i: v for i, v in enumerate(R) if v != before[i]}
                trace(Step(here, by_slot[here], changed, writes))
        finally:
            memory.writes = None

    @property
    def depth(self) -> int:
        """How many bpf-to-bpf calls are active (0: in the main program)."""
        return len(self._frames)

    def call_sites(self) -> list[int]:
        """The slots of the active calls, outermost first."""
        return [frame[0] - 1 for frame in self._frames]

    def callers(self) -> list[tuple[int, Insn | None]]:
        """The active calls, outermost first: (slot, instruction) of each call,
        in the program that made it (after a tail call from a subprogram, the
        frames above belong to other programs)."""
        out = []
        for depth, frame in enumerate(self._frames):      # frame returns to ``depth``
            code = next((c for d, c in self._tails if d > depth), self._running)
            out.append((frame[0] - 1, code.by_slot.get(frame[0] - 1)))
        return out

    @property
    def program(self) -> dict[int, Insn]:
        """The running program's instructions by slot."""
        return self._running.by_slot

    def _too_many(self, pc: int) -> NoReturn:
        self._fault(pc, f"stopped after {self.max_steps} instructions (max_steps): an endless "
                    "loop? raise max_steps for a longer run")

    # ------------------------------------------------------------ results
    def stack(self, frame: int = 0) -> bytes:
        """The 512 bytes of a frame's stack after a run (frame 0: the main program)."""
        buf = self.memory.regions[self.memory.stack_tag(frame)] if frame >= 0 else None
        if buf is None:
            raise VmError(f"frame {frame} has no stack now")
        return bytes(buf)

    def region(self, addr: int) -> bytes:
        """The bytes of the region ``addr`` points into (the context: ``vm.region(vm.CTX)``)."""
        tag = addr >> 32
        if not 0 <= tag < len(self.memory.regions) or self.memory.regions[tag] is None:
            raise VmError(f"0x{addr:x} is not in a region")
        return bytes(self.memory.regions[tag])  # type: ignore[arg-type]

    #: the address of the context / mem given to :meth:`run`
    CTX = CTX << 32


def insn_text(insn: Insn) -> str:
    """``insn`` as the VM's listings show it (a trace, the debugger, an
    error): the llvm dialect, with a helper call by its name
    (``call bpf_get_current_pid_tgid``, which assembles back), not its number."""
    from ..text import format_insn
    try:
        text = format_insn(insn)
    except ValueError:
        return repr(insn)
    if insn.code == op.JMP | op.CALL and insn.src == 0:
        from ..isa import helper_name
        name = helper_name(insn.imm)
        if name is not None:
            return f"call bpf_{name}"
    return text
