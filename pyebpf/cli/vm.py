"""``pyebpf vm run FILE``: run a program in pyebpf's pure-Python VM (no kernel,
no privilege); ``pyebpf vm step FILE``: step through it; ``pyebpf vm table``:
what every opcode does."""
from __future__ import annotations

import argparse
import sys

from .parser import Subparsers   # (at run time too, for documentation tools)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..isa import Insn
    from ..vm import Step, Vm
    from .vm_asm import AsmPrograms

DESCRIPTION = """\
Run an eBPF program in pyebpf's virtual machine: pure Python, no kernel, no
privilege.  The VM has the kernel's semantics, a checked 512-byte stack per
frame, bpf-to-bpf calls and emulated helpers; an out-of-bounds or misaligned
access stops the run with an error naming the instruction and its line.

FILE is text assembly in either dialect (detected: '%r1' means mnemonic),
raw instruction bytes, or a bpf_conformance *.data file (its memory is used
unless --mem/--mem-file is given).  r1 points to the memory, r2 is its length
(the uBPF convention).  Prints 'r0 = VALUE'.

An asm/ file (a '# pyebpf:' header, as 'pyebpf run' reads) runs with the maps
its header declares: 'vm run' runs each of its programs in file order (or the
one of --program) over the same maps, then prints the output map's events and
the maps declared with show=, as 'pyebpf run' does.  A header of maps alone
(no 'program' line, as 'pyebpf load', 'explain' and 'run --type' accept) makes
the whole file one program.  -D NAME=VALUE sets a placeholder used in the
code (${PID} is 0 unless given).

The VM's addresses are its own, not the kernel's: the high 32 bits name a
region, the low 32 the offset in it -- 0x1 the memory (context), 0x2 the
packet, 0x3 the stack of frame 0 (r10 = 0x300000200, just past its 512
bytes), 0x4.. the deeper frames, 0xb code, 0xc maps, 0xd.. map values.  The
emulated helpers say pid 1000, tgid 1000, comm 'pyebpf-vm' unless --pid,
--tgid, --comm say otherwise.
"""

EPILOG = """\
examples:
  echo 'r0 = 6; r0 *= 7; exit' > p.s; pyebpf vm run p.s
  pyebpf vm run --mem '01 02 03 04' --trace prog.s
  pyebpf vm run tests/ldxw.data
  pyebpf vm run asm/count_calls.s
  pyebpf vm step --program return asm/latency_hist.s
  pyebpf vm step -b prog.s:12 prog.s
  pyebpf vm table

exit status: 0 ran, 1 bad input or a run stopped by the VM, 2 usage error
"""


def register(sub: Subparsers) -> None:
    """Add the ``vm`` sub-command (``run``, ``table``) to ``sub``."""
    p = sub.add_parser("vm", help="run a program in the pure-Python VM (no kernel needed)",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="vm_command", metavar="ACTION")
    actions.required = True
    r = actions.add_parser("run", help="run FILE and print r0", description=DESCRIPTION,
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("file", metavar="FILE", help="text assembly, raw bytes or a *.data file "
                                                "(- for standard input)")
    mem = r.add_mutually_exclusive_group()
    mem.add_argument("--mem", metavar="HEX", help="the memory as hex bytes ('01 02' or '0102')")
    mem.add_argument("--mem-file", metavar="F", help="the memory: the bytes of file F")
    r.add_argument("--dialect", choices=("llvm", "mnemonic"), default=None,
                   help="the text dialect (default: detected)")
    r.add_argument("--trace", action="store_true",
                   help="print each executed instruction with the registers and memory it changed")
    r.add_argument("--max-steps", type=int, default=None, metavar="N",
                   help="stop after N instructions (default: 50 million)")
    _asm_options(r)
    r.set_defaults(func=run)
    d = actions.add_parser("step", help="step through FILE in a terminal debugger",
                           description="Run FILE in the VM under a step debugger: it stops "
                           "before the first instruction and at breakpoints; commands: step, "
                           "next (over calls), continue, break/delete INDEX|FILE:LINE, regs, "
                           "stack [N], maps, where, quit, help. At the end of input the program "
                           "runs to completion. A register that holds one of the VM's "
                           "addresses is shown with where it points: stack0[504] is r10 - 8 "
                           "in frame 0's stack ('pyebpf vm --help' and the help command say "
                           "more).")
    d.add_argument("file", metavar="FILE", help="text assembly, raw bytes or a *.data file")
    dmem = d.add_mutually_exclusive_group()
    dmem.add_argument("--mem", metavar="HEX", help="the memory as hex bytes")
    dmem.add_argument("--mem-file", metavar="F", help="the memory: the bytes of file F")
    d.add_argument("--dialect", choices=("llvm", "mnemonic"), default=None,
                   help="the text dialect (default: detected)")
    d.add_argument("-b", "--break", dest="breaks", action="append", default=[],
                   metavar="WHERE", help="a breakpoint (instruction index or FILE:LINE); repeatable")
    _asm_options(d)
    d.set_defaults(func=step)
    t = actions.add_parser("table", help="print what every opcode does (the VM's semantics table)")
    t.set_defaults(func=table)


def _asm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                   help="an asm/ file's parameter (its ${NAME} placeholders); repeatable")
    p.add_argument("--program", metavar="NAME", default=None,
                   help="of an asm/ file with several programs, run this one (step: default "
                        "the first)")
    p.add_argument("--pid", type=_id, default=None, metavar="N",
                   help="the thread id bpf_get_current_pid_tgid returns (low half; default "
                        "1000)")
    p.add_argument("--tgid", type=_id, default=None, metavar="N",
                   help="the process id it returns (high half; default: --pid, else 1000)")
    p.add_argument("--comm", metavar="NAME", default=None,
                   help="the task name bpf_get_current_comm returns (default pyebpf-vm; at "
                        "most 15 bytes)")


def _id(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (0 to 4294967295)")
    return value


def _task(args: argparse.Namespace) -> dict[str, Any]:
    """The Vm keyword arguments of --pid, --tgid, --comm."""
    from ..errors import OptionError
    kw: dict[str, Any] = {}
    if args.pid is not None:
        kw["pid"] = kw["tgid"] = args.pid
    if args.tgid is not None:
        kw["tgid"] = args.tgid
    if args.comm is not None:
        comm = args.comm.encode()
        if not comm or len(comm) > 15 or b"\0" in comm:
            raise OptionError(f"--comm {args.comm!r}: a task name is 1 to 15 bytes")
        kw["comm"] = comm
    return kw


def table(args: argparse.Namespace) -> int:
    """Print the semantics table."""
    from ..vm import semantics
    print(semantics.table())
    return 0


def _hex_mem(text: str) -> bytes:
    from ..errors import OptionError
    cleaned = "".join(text.split())
    if cleaned[:2] in ("0x", "0X"):
        cleaned = cleaned[2:]
    try:
        return bytes.fromhex(cleaned)
    except ValueError:
        raise OptionError(f"--mem {text!r}: not hex bytes (e.g. '01 02 ff' or '0102ff')") from None


class Input:
    """What FILE holds: ``insns`` and the memory it carries (a *.data file's),
    or, for an asm/ file, ``asm`` (its programs and map declarations)."""

    def __init__(self, insns: list[Insn], mem: bytes | None,
                 asm: AsmPrograms | None = None) -> None:
        self.insns = insns
        self.mem = mem
        self.asm = asm

    def programs(self, name: str | None) -> list[tuple[str | None, list[Insn]]]:
        """(name, instructions) to run: the asm file's (``name``: that one) or the one."""
        if self.asm is None:
            if name is not None:
                from ..errors import OptionError
                raise OptionError("--program picks a program of an asm/ file (one with a "
                                  "'# pyebpf: program' header)")
            return [(None, self.insns)]
        return list(self.asm.select(name))

    def maps(self) -> dict[str, Any]:
        """The map specs an asm file declares (none otherwise)."""
        return dict(self.asm.maps) if self.asm is not None else {}

    def open_output(self, vm: Vm) -> None:
        """An asm file's output map: start reading ``vm``'s events."""
        if self.asm is not None:
            self.asm.open_output(vm)

    def finish(self, vm: Vm, r0: int | None) -> None:
        """Print what the run printed (trace_printk) and ``r0`` (None: quit)."""
        for line in vm.printk:
            print(f"trace_printk: {line}")
        print("quit" if r0 is None else f"r0 = {r0} (0x{r0:x})")

    def report(self, vm: Vm) -> None:
        """An asm file's events and ``show=`` maps, after the last program."""
        if self.asm is not None:
            self.asm.report(vm, sys.stdout)

    def __enter__(self) -> "Input":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.asm is not None:
            self.asm.close()


def _defines(items: list[str]) -> dict[str, str]:
    from ..errors import OptionError
    values = {}
    for d in items:
        name, eq, value = d.partition("=")
        if not eq or not name:
            raise OptionError(f"-D {d!r}: expected NAME=VALUE")
        values[name] = value
    return values


def load(path: str, dialect: str | None, defines: dict[str, str] | None = None) -> Input:
    """What ``path`` holds (see :class:`Input`); ``defines``: an asm file's parameters."""
    from ..errors import OptionError
    from ..isa import decode
    from ..text import assemble, parse_conformance
    from ..text.lexer import decode_source

    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    name = "<stdin>" if path == "-" else path
    if not data.strip():
        raise OptionError(f"{name}: the file is empty")
    if path.endswith(".data") and b"-- " in data:
        from ..vm.conformance import test_program
        test = parse_conformance(decode_source(data, name), name)
        return Input(test_program(test), test.mem)
    try:
        text = data.decode("utf-8") if b"\0" not in data else None
    except UnicodeDecodeError:
        text = None
    if text is None:                   # binary: instruction slots, else text with a bad byte
        if len(data) % 8:
            if b"\0" not in data:
                decode_source(data, name)           # says where the text stops being UTF-8
            raise OptionError(f"{name}: raw instruction bytes come in 8-byte slots; "
                              f"{len(data)} bytes is not a multiple of 8")
        return Input(decode(data), None)
    from . import vm_asm
    if vm_asm.is_asm_file(text):
        if dialect == "mnemonic":
            raise OptionError(f"{name}: an asm/ file's code is in the llvm dialect")
        return Input([], None, vm_asm.read(text, name, defines))
    if defines:
        raise OptionError("-D sets a parameter of an asm/ file (one with a "
                          "'# pyebpf:' header)")
    if dialect is None:
        dialect = "mnemonic" if "%r" in text else "llvm"
    return Input(list(assemble(text, dialect, name).finalize()), None)


def _input(args: argparse.Namespace) -> Input:
    got = load(args.file, args.dialect, _defines(args.define))
    if args.mem is not None:
        got.mem = _hex_mem(args.mem)
    elif args.mem_file is not None:
        with open(args.mem_file, "rb") as f:
            got.mem = f.read()
    return got


def step(args: argparse.Namespace) -> int:
    """Run the file under the step debugger; the exit status."""
    from ..vm import Vm
    from ..vm.debugger import debug

    if args.file == "-":
        from ..errors import OptionError
        raise OptionError("the debugger reads its commands from standard input: give FILE")
    with _input(args) as got:
        _, insns = got.programs(args.program)[0]
        vm = Vm(insns, got.maps(), **_task(args))
        got.open_output(vm)
        r0 = debug(vm, got.mem, sys.stdin.readline, sys.stdout, args.breaks,
                   echo=not sys.stdin.isatty())
        got.finish(vm, r0)
        if r0 is not None:
            got.report(vm)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the file (each program of an asm file), print r0 (and the trace);
    the exit status."""
    from ..vm import Vm

    kw = _task(args)
    if args.max_steps is not None:
        kw["max_steps"] = args.max_steps
    with _input(args) as got:
        programs = got.programs(args.program)
        maps: dict[str, Any] = got.maps()
        for name, insns in programs:
            vm = Vm(insns, maps, **kw)
            maps = dict(vm.maps)              # the next program shares these
            got.open_output(vm)
            if len(programs) > 1:
                print(f"program {name}:")
            try:
                r0 = vm.run(got.mem if got.mem is not None else b"",
                            trace=_Tracer(vm) if args.trace else None)
            finally:
                sys.stdout.flush()
            got.finish(vm, r0)
        got.report(vm)
    return 0


class _Tracer:
    """Prints one line per executed instruction: its index, its text, and
    what it changed (registers; memory as region[offset])."""

    def __init__(self, vm: Vm) -> None:
        from ..vm.machine import insn_text
        self.vm = vm
        self.format = insn_text
        self.texts: dict[int, str] = {}

    def __call__(self, step: Step) -> None:
        text = self.texts.get(step.index)
        if text is None:
            text = self.format(step.insn)
            self.texts[step.index] = text
        changes = [f"r{n}=0x{v:x}" for n, v in sorted(step.regs.items())]
        changes += [f"{self.vm.memory.short(a)}={v:#x}/{n}" for a, n, v in step.writes]
        print(f"{step.index:5}: {text:40} {' '.join(changes)}".rstrip())
