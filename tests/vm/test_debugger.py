"""The step debugger: step, next over calls, breakpoints by index and source line,
registers, stack, maps, where, quit -- driven by scripted input (pure; no kernel)."""
from __future__ import annotations

import io
import pathlib
import subprocess
import sys


from pyebpf.text import assemble
from pyebpf.vm import Vm
from pyebpf.vm.debugger import debug

# (not "from conftest import": another directory's conftest module may hold that name)
ROOT = pathlib.Path(__file__).resolve().parents[2]

SOURCE = """\
r6 = 100
r1 = 5
call f
r0 += r6
exit
f:
r6 = 1
r0 = r1
*(u64 *)(r10 - 8) = r0
exit
"""


def session(commands: str, breakpoints: tuple[str, ...] = ()) -> tuple[int | None, str]:
    vm = Vm(assemble(SOURCE, "llvm", "d.s"))
    out = io.StringIO()
    r0 = debug(vm, None, io.StringIO(commands).readline, out, list(breakpoints))
    return r0, out.getvalue()


def test_step_shows_each_instruction_and_its_changes() -> None:
    r0, out = session("s\ns\n")
    assert r0 == 105
    assert "=>    0: r6 = 100" in out and "r6 = 0x64" in out
    assert "=>    2: call f" in out                     # stopped before the third
    assert "r0 = 0x69" not in out                         # then ran to the end silently


def test_next_steps_over_a_call() -> None:
    _, out = session("s\ns\nn\nq\n")
    lines = out.splitlines()
    after_call = lines.index(next(x for x in lines if "=>    2: call f" in x)) + 1
    assert lines[after_call] == "(vm) n"
    assert lines[after_call + 1] == "    r6 = 0x64, r10 = 0x300000200 (stack0[512])"  # what the call changed
    assert "=>    3: r0 += r6" in lines[after_call + 2]
    assert "=>    6:" not in out and "stack1" not in out      # nothing inside f shown


def test_breakpoint_by_source_line_where_stack_and_regs() -> None:
    r0, out = session("c\nwhere\nstack 8\nregs\nc\n", ("d.s:9",))
    assert r0 == 105
    assert "breakpoint at 7" in out
    assert "called from    2: call f" in out and "d.s:3" in out
    assert "r10   -8: 00 00 00 00 00 00 00 00" in out
    assert "r10= 0x0000000400000200" in out                   # frame 1's stack


def test_addresses_say_where_they_point() -> None:
    # the VM's addresses are its own (0x300000200 is r10 of frame 0): a
    # register that holds one is shown with its region and offset, and
    # help says how they are made (before: bare hex, explained nowhere in step)
    source = "r1 = r10\nr1 += -8\nr2 = 5\nr0 = 0\nexit\n"
    vm = Vm(assemble(source, "llvm", "a.s"))
    out = io.StringIO()
    debug(vm, b"\x01\x02", io.StringIO("regs\ns\ns\ns\nregs\nhelp\nq\n").readline, out)
    text = out.getvalue()
    assert "addresses: r1 -> ctx[0], r10 -> stack0[512]" in text, text
    assert "    r1 = 0x300000200 (stack0[512])\n" in text
    assert "    r1 = 0x3000001f8 (stack0[504])\n" in text
    assert "    r2 = 0x5\n" in text                          # a number: no place
    assert "addresses: r1 -> stack0[504], r10 -> stack0[512]" in text
    assert "the high 32 bits name a region" in text and "r10 - 8 is stackN[504]" in text



def test_map_addresses_name_their_map() -> None:
    from pyebpf.kernel.constants import MapType
    from pyebpf.vm import VmMap
    source = ("*(u32 *)(r10 - 4) = 1\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
              "call bpf_map_lookup_elem\nr0 += 4\nr0 = 0\nexit\n")
    vm = Vm(assemble(source, "llvm", "m.s"), {"counts": VmMap(MapType.ARRAY, 4, 8, 4, "counts")})
    out = io.StringIO()
    debug(vm, b"", io.StringIO("b 7\nc\nregs\nc\n").readline, out)
    text = out.getvalue()
    assert "addresses: r0 -> mem#13[4]: a value of map counts, r1 -> map#0: counts, " \
           "r2 -> stack0[508], r10 -> stack0[512]" in text, text


def test_breakpoint_by_index_delete_and_errors() -> None:
    _, out = session("b 3\nb 99\nb nowhere.s:1\nd 3\nc\n")
    assert "breakpoint at 3" in out
    assert "error: there is no instruction at 99" in out
    assert "error: no instruction comes from 'nowhere.s:1'" in out
    assert "=>    3:" not in out                              # deleted before it was reached


def test_quit_and_unknown_command() -> None:
    r0, out = session("frobnicate\nhelp\nq\n")
    assert r0 is None
    assert "unknown command 'frobnicate'" in out and "next (over calls)" not in out
    assert "run one instruction, over a bpf-to-bpf call" in out


def test_vm_step_command_line(tmp_path) -> None:
    prog = tmp_path / "d.s"
    prog.write_text(SOURCE)
    proc = subprocess.run([sys.executable, "-m", "pyebpf", "vm", "step", "-b", "d.s:9", str(prog)],
                          input="c\nmaps\nc\n", capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "=>    7: *(u64 *)(r10 - 8) = r0" in proc.stdout and "no maps" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "r0 = 105 (0x69)"


def test_where_after_a_tail_call_from_a_subprogram() -> None:
    # the frames above a tail call belong to two programs: each call site is shown
    # with its own program's instruction (before: the running program's, by slot)
    from pyebpf.kernel.constants import MapType
    from pyebpf.vm import VmMap
    target = assemble("r0 = 1\nr0 = 2\ncall g\nexit\ng:\nr0 = 3\nexit", "llvm", "t.s")
    table = VmMap(MapType.PROG_ARRAY, 4, 4, 4, "jmp")
    table.programs[0] = target
    main = assemble("call sub\nexit\nsub:\nr2 = jmp ll\nr3 = 0\ncall bpf_tail_call\nexit",
                    "llvm", "m.s")
    vm = Vm(main, {"jmp": table})
    out = io.StringIO()
    # slot 4 is "r3 = 0" in main, then "r0 = 3" in the target
    r0 = debug(vm, b"", io.StringIO("c\nc\nwhere\nc\n").readline, out, ["4"])
    assert r0 == 3
    text = out.getvalue()
    assert "=>    4: r0 = 3" in text and "t.s:6" in text
    assert "called from    2: call g" in text and "t.s:3" in text
    assert "called from    0: call sub" in text and "m.s:1" in text
