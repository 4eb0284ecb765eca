"""``pyebpf run FILE --type TYPE``: a file whose header declares maps but no
``program ... attach=`` line is loaded whole as one program of TYPE,
test-run, and its ``show=`` maps printed as at the end of a run (before,
``run`` said 'nothing to load' and had no --type)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

COUNT = ("# pyebpf: param SLOT=0 the array slot to add to\n"
         "# pyebpf: map counts array key=u32 value=u64 entries=4 show=count\n"
         "*(u32 *)(r10 - 4) = ${SLOT}\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
         "call bpf_map_lookup_elem\nif r0 == 0 goto out\nr1 = 1\n"
         "lock *(u64 *)(r0 + 0) += r1\nout:\nr0 = 2\nexit\n")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyebpf", "run", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.mark.kernel
@pytest.mark.parametrize("ptype", ["xdp", "socket_filter"])
def test_header_maps_without_attach_run_as_the_type(tmp_path: pathlib.Path, ptype: str) -> None:
    prog = tmp_path / "count.s"
    prog.write_text(COUNT)
    r = cli(str(prog), "--type", ptype, "--repeat", "7", "-D", "SLOT=2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "r0 = 2 (0x2), 7 runs\n\n@counts[2]: 7\n", r.stdout
    r = cli(str(prog), "--type", ptype, "--test-run", "00 11", "--json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"type": "test_run", "retval": 2, "repeat": 1},
        {"type": "map", "data": {"@counts": {"0": 1}}}]


@pytest.mark.kernel
def test_the_output_map_s_events_are_printed(tmp_path: pathlib.Path) -> None:
    # (they were dropped: only r0 and the show= maps came out)
    prog = tmp_path / "out.s"
    prog.write_text("# pyebpf: map events ringbuf entries=4096\n"
                    "# pyebpf: output events fields=len:u32,tag:u32 format=\"len %d tag %d\"\n"
                    "*(u32 *)(r10 - 8) = 20\n*(u32 *)(r10 - 4) = 7\nr1 = events ll\n"
                    "r2 = r10\nr2 += -8\nr3 = 8\nr4 = 0\ncall bpf_ringbuf_output\n"
                    "r0 = 0\nexit\n")
    r = cli(str(prog), "--type", "socket_filter", "--test-run", "00" * 20, "--repeat", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "r0 = 0 (0x0), 2 runs\nlen 20 tag 7\nlen 20 tag 7\n", r.stdout
    r = cli(str(prog), "--type", "socket_filter", "--json")
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"type": "test_run", "retval": 0, "repeat": 1},
        {"type": "event", "output": "events", "fields": {"len": 20, "tag": 7}}], r.stdout


@pytest.mark.kernel
def test_a_rejection_names_the_line(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "pkt.s"
    prog.write_text("# pyebpf: map counts array key=u32 value=u64 entries=1\n"
                    "r2 = *(u32 *)(r1 + 0)\nr0 = *(u8 *)(r2 + 12)\nexit\n")
    r = cli(str(prog), "--type", "xdp")
    assert r.returncode == 1 and "outside of the packet" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("argv, words", [
    (["--type", "xdp", "-d", "3"], "-d does not apply"),
    (["--repeat", "3"], "give --type too"),
    (["--type", "bogus"], "unknown program type 'bogus'"),
])
def test_bad_combinations_are_one_line(tmp_path: pathlib.Path, argv: list[str],
                                       words: str) -> None:
    prog = tmp_path / "count.s"
    prog.write_text(COUNT)
    r = cli(str(prog), *argv)
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_file_that_attaches_is_refused_with_type() -> None:
    r = cli(str(ROOT / "asm" / "count_calls.s"), "--type", "xdp")
    assert r.returncode == 1 and "its header attaches its programs (line 11)" in r.stderr, \
        r.stderr
