"""The verifier's view against the real kernel: states beside source lines,
the path to a rejection, loops and subprograms, and the command line."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from pyebpf.errors import VerifierError
from pyebpf.explain import explain, explain_error, parse_log
from pyebpf.loader import load
from pyebpf.program import R0, Program
from pyebpf.text import assemble


# (each test that needs the kernel is marked `kernel`; the others run under every Python)
ROOT = pathlib.Path(__file__).resolve().parents[2]

BOUNDS = """\
    r1 = *(u32 *)(r1 + 0)
    if r1 > 10 goto out
    r0 = r1
    r0 += 3
    exit
out:
    r0 = 0
    exit
"""

# the rejected access sits on the branch the verifier walks second
REJECTED_ON_BRANCH = """\
    r2 = *(u32 *)(r1 + 0)
    if r2 > 10 goto big
    if r2 > 5 goto mid
    r0 = 0
    exit
mid:
    r0 = 1
    exit
big:
    r0 = *(u64 *)(r10 + 8)
    exit
"""

LOOP = """\
    r0 = 0
    r1 = 0
top:
    r0 += r1
    r1 += 1
    if r1 < 4 goto top
    exit
"""

SUBPROGRAM = """\
    r1 = 5
    call sub
    exit
sub:
    r0 = r1
    r0 += 1
    exit
"""

BAD_SUBPROGRAM = """\
    r1 = 5
    call sub
    exit
sub:
    r0 = *(u64 *)(r10 + 8)
    exit
"""


def steps_at(expl, index):
    return [s for s in expl.parsed.steps if s.index == index]


@pytest.mark.kernel
def test_accepted_shows_a_range_after_a_bounds_check():
    e = explain(assemble(BOUNDS, filename="bounds.s"), "socket_filter")
    assert e.accepted and e.error is None
    (after_check,) = steps_at(e, 1)
    assert "umax32=10" in after_check.registers()["R1"]      # the range the check proved
    text = e.text()
    assert "# bounds.s:2" in text
    line = next(l for l in text.splitlines() if l.strip().startswith("1: if r1 > 0xa"))
    assert "R1=scalar(" in line and "umax32=10" in line
    assert "not walked" not in text                          # both branches were walked
    assert "processed" in text and e.parsed.stats["processed"] >= 7


@pytest.mark.kernel
def test_rejection_marks_the_failing_instruction_on_the_walked_path():
    e = explain(assemble(REJECTED_ON_BRANCH, filename="branchy.s"), "socket_filter")
    assert not e.accepted and isinstance(e.error, VerifierError)
    path = e.parsed.path()
    assert [s.index for s in path] == [0, 1, 7]             # not through insn 2's branch
    assert path[-1].branch == (1, 7)
    text = e.text()
    marked = [l for l in text.splitlines() if l.startswith("-->")]
    assert marked == ["--> 7: r0 = *(u64 *)(r10 +8)"]
    assert "# branchy.s:10" in text and "from 1 to 7:" in text
    assert "invalid" in text and "the verifier:" in text
    assert "umin32=11" in text                                  # the state on that branch


@pytest.mark.kernel
def test_loop_shows_one_state_per_iteration():
    e = explain(assemble(LOOP, filename="loop.s"), "socket_filter")
    assert e.accepted
    assert len(steps_at(e, 3)) == 4                          # r1 += 1, four iterations
    text = e.text(visits=10)
    assert "[walked 4x]" in text
    for k in range(1, 5):
        assert f"R1={k}" in text
    assert "more states" in e.text(visits=2)


@pytest.mark.kernel
def test_subprogram_states_are_in_its_frame():
    e = explain(assemble(SUBPROGRAM, filename="sub.s"), "socket_filter")
    assert e.accepted and e.parsed.functions == {0: 0, 1: 3}
    (add,) = steps_at(e, 4)
    assert add.frame == 1 and add.registers()["R0"] == "6"
    (back,) = steps_at(e, 2)
    assert back.frame == 0
    assert [s.index for s in e.parsed.path()] == [0, 1, 3, 4, 5, 2]
    assert "subprogram #1 (slot 3):" in e.text()


@pytest.mark.kernel
def test_rejection_inside_a_subprogram():
    e = explain(assemble(BAD_SUBPROGRAM, filename="badsub.s"), "socket_filter")
    assert not e.accepted
    path = e.parsed.path()
    assert [s.index for s in path] == [0, 1, 3] and path[-1].frame == 1
    assert "--> 3: r0 = *(u64 *)(r10 +8)" in e.text()
    assert "badsub.s:5" in e.text()


@pytest.mark.kernel
def test_python_program_shows_its_source_line():
    p = Program("explain_py")
    p.mov(R0, 7)  # the line explain shows
    p.exit()
    e = explain(p, "socket_filter")
    assert e.accepted
    assert "test_explain.py:" in e.text() and "p.mov(R0, 7)  # the line explain shows" in e.text()
    assert "R0=7" in e.text()


@pytest.mark.kernel
def test_explain_error_of_a_caught_rejection():
    prog = assemble(REJECTED_ON_BRANCH, filename="branchy.s")
    with pytest.raises(VerifierError) as info:
        load(prog, "socket_filter")
    e = explain_error(info.value, prog)
    assert e.parsed.path()[-1].index == 7
    assert "--> 7:" in e.text() and "# branchy.s:10" in e.text()


@pytest.mark.kernel
def test_no_fd_leaks(no_fd_leak):
    for src in (BOUNDS, REJECTED_ON_BRANCH):
        explain(assemble(src), "socket_filter")


def test_parse_log_stats_and_unknown_lines():
    log = ("func#0 @0\n0: R1=ctx() R10=fp0\n0: (b7) r0 = 0                        ; R0=0\n"
           "something new\n1: (95) exit\nverification time 12 usec\nstack depth 8+16\n"
           "processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 "
           "peak_states 0 mark_read 0\n")
    p = parse_log(log)
    assert [s.index for s in p.steps] == [0, 1] and p.steps[0].entry == "R1=ctx() R10=fp0"
    assert p.error is None                    # text before an instruction is not an error
    assert p.stats == {"verification_time_usec": 12, "stack_depth": 24, "processed": 2,
                       "max_states_per_insn": 0, "total_states": 0, "peak_states": 0,
                       "mark_read": 0}


def cli(*argv, stdin=b""):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pyebpf", "explain", *argv], input=stdin,
                          capture_output=True, timeout=60, env=env)


@pytest.mark.kernel
def test_cli_accepted_and_rejected(tmp_path):
    good = tmp_path / "good.s"
    good.write_text(BOUNDS)
    r = cli(str(good), "--type", "socket_filter")
    assert r.returncode == 0, r.stderr
    assert b"good.s:2" in r.stdout and b"umax32=10" in r.stdout and not r.stderr
    bad = tmp_path / "bad.s"
    bad.write_text(REJECTED_ON_BRANCH)
    log = tmp_path / "v.log"
    r = cli(str(bad), "--log", str(log))
    assert r.returncode == 1
    assert b"--> 7: r0 = *(u64 *)(r10 +8)" in r.stdout
    assert r.stderr.startswith(b"pyebpf explain: ") and r.stderr.count(b"\n") == 1
    assert "from 1 to 7:" in log.read_text()


@pytest.mark.kernel
def test_cli_header_maps_and_type():
    r = cli(str(ROOT / "asm" / "count_calls.s"))
    assert r.returncode == 0, r.stderr
    assert b"map_value_or_null" in r.stdout and b"r1 = map_fd(calls)" in r.stdout


@pytest.mark.kernel
def test_cli_shows_each_source_line_with_its_text(tmp_path):
    # `# file.s:N` carries the line as written: its map name, its comment
    r = cli(str(ROOT / "asm" / "count_calls.s"))
    assert r.returncode == 0, r.stderr
    assert b"# " + str(ROOT / "asm" / "count_calls.s").encode() + \
        b":14: r0 >>= 32                       # the process id (tgid) is in the upper half" \
        in r.stdout, r.stdout.decode()[:2000]


@pytest.mark.kernel
def test_cli_header_of_maps_alone_with_a_type(tmp_path):
    # a header that declares maps but no `program ... attach=` line: --type says the type
    f = tmp_path / "lookup.s"
    f.write_text("# pyebpf: map counts array key=u32 value=u64 entries=4\n"
                 "*(u32 *)(r10 - 4) = 0\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
                 "call bpf_map_lookup_elem\nif r0 == 0 goto out\nr0 = *(u64 *)(r0 + 0)\n"
                 "out:\nr0 = 0\nexit\n")
    r = cli(str(f), "--type", "xdp")
    assert r.returncode == 0, r.stderr
    assert b"R1=map_ptr(map=counts" in r.stdout, r.stdout


LOOKUP = ("# pyebpf: map counts hash key=u32 value=u64 entries=4\n"
          "*(u32 *)(r10 - 4) = 0\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
          "call bpf_map_lookup_elem\n")


@pytest.mark.kernel
def test_maybe_null_map_value_dereference_says_to_test_for_null(tmp_path):
    # not tested at all: pyebpf's own check says so before the kernel
    f = tmp_path / "null.s"
    f.write_text(LOOKUP + "r0 = *(u64 *)(r0 + 0)\nexit\n")
    r = cli(str(f), "--type", "xdp")
    err = r.stderr.decode()
    assert r.returncode == 1 and "null.s:7: load through r0, a map value that may be NULL: " \
        "test it" in err, err
    # tested, but dereferenced on the branch where it is NULL: the verifier
    # says 'scalar' (the 0), and the hint talked of plain numbers and
    # bpf_probe_read; it says the pointer is NULL there
    f.write_text(LOOKUP + "r6 = r0\nif r6 == 0 goto missing\nr0 = *(u64 *)(r6 + 0)\nexit\n"
                 "missing:\nr0 = *(u32 *)(r6 + 4)\nexit\n")
    r = cli(str(f), "--type", "xdp")
    out = r.stdout.decode()
    assert r.returncode == 1 and "R6 invalid mem access 'scalar'" in out, out
    assert "hint: r6 is NULL here" in out and "probe_read" not in out, out


@pytest.mark.kernel
def test_packet_access_without_a_bounds_check_gets_a_data_end_hint(tmp_path):
    f = tmp_path / "pkt.s"
    f.write_text("r2 = *(u32 *)(r1 + 0)\nr0 = *(u8 *)(r2 + 12)\nexit\n")
    r = cli(str(f), "--type", "xdp")
    assert r.returncode == 1
    out = r.stdout.decode()
    assert "hint: prove the access is inside the packet first" in out and "data_end" in out, out
    # the verifier's two-line complaint stays under its label
    assert "\n                      R2 offset is outside of the packet\n" in out, out



@pytest.mark.kernel
def test_packet_access_past_its_bounds_check_says_how_far_the_check_went(tmp_path):
    # a check proved 14 bytes, the access needs 21: the hint said to compare
    # with data_end, as if there were no check
    f = tmp_path / "short.s"
    f.write_text("r2 = *(u32 *)(r1 + 0)\nr3 = *(u32 *)(r1 + 4)\nr4 = r2\nr4 += 14\n"
                 "if r4 > r3 goto out\nr0 = *(u8 *)(r2 + 20)\nout:\nr0 = 0\nexit\n")
    r = cli(str(f), "--type", "xdp")
    out = r.stdout.decode()
    assert r.returncode == 1 and "hint: the bounds check before this proved 14 bytes" in out, out
    assert "needs 21 (off=20 + size=1): compare the pointer plus 21 (not 14)" in out, out
