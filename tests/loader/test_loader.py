"""Loading programs into the real kernel: verifier errors that point at the
source line, test_run, introspection, and fd hygiene."""
import inspect
import subprocess
import sys

import pytest

from pyebpf.errors import ProgramError, VerifierError
from pyebpf.loader import failing_instruction, load
from pyebpf.maps import HashMap
from pyebpf.program import R0, R1, R2, R3, R10, Program
from pyebpf.text import assemble

pytestmark = pytest.mark.kernel
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def here(delta=0):
    frame = inspect.currentframe().f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno + delta}"


# ---------------------------------------------------------------- DSL programs
def broken_uninitialised():
    p = Program("uninit")
    p.mov(R0, 0)
    p.add(R0, R3); line = here()
    p.exit()
    return p, line, "R3 !read_ok"


def broken_unchecked_map_value(m):
    p = Program("nullderef")
    k = p.stack_store(0, 4)
    p.ld_map(R1, m).stack_pointer(R2, k).call("map_lookup_elem")
    p.ldxdw(R0, R0, 0); line = here()
    p.exit()
    return p, line, "map_value_or_null"


def broken_stack_bounds():
    p = Program("oob")
    p.stdw(R10, -520, 1); line = here()
    p.ret(0)
    return p, line, "invalid write to stack"


def broken_helper_argument():
    p = Program("badarg")
    p.mov(R1, 5)
    p.mov(R2, R10).add(R2, -8)
    p.call("map_lookup_elem"); line = here()
    p.ret(0)
    return p, line, "expected=map_ptr"


def broken_unreachable():
    p = Program("unreach")
    p.ret(0)
    p.mov(R0, 1); line = here()
    p.exit()
    return p, line, "unreachable insn 2"


def broken_unbounded_loop():
    # As root the verifier walks the loop until its 1M-instruction budget is
    # spent; the last instruction it printed is inside the loop.
    p = Program("loop")
    p.mov(R0, 0)
    p.label("top")
    p.add(R0, 1); line = here()
    p.ja("top")
    return p, line, "too large"


@pytest.mark.parametrize("make", [broken_uninitialised, broken_unchecked_map_value,
                                  broken_stack_bounds, broken_helper_argument,
                                  broken_unreachable, broken_unbounded_loop])
def test_verifier_error_points_at_dsl_line(make):
    with HashMap(key="u32", value="u64", max_entries=4, name="m") as m:
        args = (m,) if "map" in make.__name__ else ()
        program, line, words = make(*args)
        with pytest.raises(VerifierError) as exc:
            load(program, "xdp", maps={"m": m}, check=False)
    err = exc.value
    assert words in err.message or words in err.log
    assert err.origin == line, (err.origin, line, err.log[-500:])
    assert err.index is not None and str(err).startswith(line)
    assert "processed" in err.log or err.log


TEXT_CASES = [
    ("r0 = 0\nr0 += r3\nexit\n", 2, "R3 !read_ok"),
    ("r0 = 0\nexit\nr0 = 1\nexit\n", 3, "unreachable insn 2"),
    ("r1 = 0\n*(u64 *)(r10 - 520) = r1\nr0 = 0\nexit\n", 2, "invalid write to stack"),
    ("r0 = 0\nloop:\nr0 += 1\ngoto loop\n", 3, "too large"),
]


@pytest.mark.parametrize("text, line, words", TEXT_CASES)
def test_verifier_error_points_at_text_line(text, line, words):
    program = assemble(text, "llvm", "prog.s")
    with pytest.raises(VerifierError) as exc:
        load(program, "xdp", check=False)
    assert exc.value.origin == f"prog.s:{line}"
    assert words in exc.value.message


def test_static_check_runs_before_loading():
    p, line, _ = broken_uninitialised()
    with pytest.raises(ProgramError) as exc:
        load(p, "xdp")
    assert exc.value.origin == line


def test_failing_instruction_from_log():
    log = "0: R1=ctx() R10=fp0\n0: (b7) r0 = 0                        ; R0=0\n1: (0f) r0 += r3\nR3 !read_ok\n"
    assert failing_instruction(log, "R3 !read_ok") == (1, "r0 += r3")
    assert failing_instruction("", "unreachable insn 7") == (7, None)


def test_missing_map_is_named():
    p = Program()
    p.ld_map(R1, "nope"); line = here()
    p.ret(0)
    with pytest.raises(ProgramError, match="map 'nope' is referenced") as exc:
        load(p, "xdp")
    assert exc.value.origin == line


def test_successful_load_keeps_the_log_on_request_and_runs(no_fd_leak):
    p = Program("two")
    p.mov(R0, 2).exit()
    with load(p, "xdp", log_level=2) as prog:
        assert "processed 2 insns" in prog.log
        run = prog.test_run(bytes(64), repeat=100)
        assert run.retval == 2 and run.duration_ns >= 0
        info = prog.info()
        assert info.name == "two" and len(info.tag) == 16 and info.xlated_len == 16
        assert repr(info).startswith("ProgInfo(type=6 (XDP), id=") and "name='two'" in repr(info)
        assert [i.code for i in prog.xlated()] == [0xb7, 0x95]
        assert "mov eax, 2" in prog.jited_asm()
    assert prog.closed


def test_map_increment_idiom_counts_in_the_kernel(no_fd_leak):
    with HashMap(key="u32", value="u64", max_entries=8, name="counts") as counts:
        p = Program("count")
        k = p.stack_store(7, 4)
        p.map_increment(counts, k)
        p.ret(2)
        with load(p, "xdp") as prog:
            prog.test_run(bytes(64), repeat=1000)
            assert counts[7] == 1000
            text = prog.xlated_text()
            assert "map[counts]" in text


def test_loaded_program_closes_on_gc(no_fd_leak):
    p = Program()
    p.ret(0)
    prog = load(p, "xdp")
    del prog  # the fd is released by garbage collection (checked by no_fd_leak)


def test_conformance_command(conformance_dir):
    out = subprocess.run([sys.executable, "-m", "pyebpf", "conformance", str(conformance_dir)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    lines = out.stdout.strip().splitlines()
    last = lines[-1]
    passed, failed = (int(x.split()[0]) for x in last.split(", "))
    assert passed >= 300 and failed == 0, out.stdout[-2000:]
    rejected = [l for l in lines if l.startswith("REJECTED")]
    assert len(rejected) == 13
    assert all("invalid shift" in l or "unknown opcode 8d" in l for l in rejected)
    assert out.returncode == 0
