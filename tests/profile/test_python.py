"""Python frames in profiles: the layouts against each CPython's own headers,
the line tables against each CPython's own ``co_lines()``, and profiles of a
pure-Python workload of known shape (pyshapes.py) on every CPython 3.10+
found: names, files, lines, shares, and py-spy's view of the same run."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

from pyebpf.draw.folded import parse_folded
from pyebpf.symbols.python import (CODE_HEAD, CODE_VALUE_SIZE, FILE_MAX, LAYOUTS, NAME_MAX,
                                   decode_cached_code, decode_line, interleave, python_runs)

from browser import browse
from pyworkloads import WORKLOAD, cpythons, marked_lines, missing_shapes

from .conftest import HERE, ROOT, cli

SHARES = {"hot": 3 / 7, "cold": 1 / 7, "recurse": 1 / 7, "numbers": 1 / 7, "by_key": 1 / 7}


_VERSIONS = cpythons()


def _version(exe: str) -> tuple[int, int]:
    return _VERSIONS[exe]


def _pythons() -> list[str]:
    """CPython 3.10+ executables on this machine (pyenv's and the system's)."""
    return list(_VERSIONS)


def _those(keep: Callable[[tuple[int, int]], bool], what: str) -> list[Any]:
    """The CPythons found whose version ``keep`` takes (a test of each: not
    a skip per interpreter that does not apply)."""
    return [e for e, v in _VERSIONS.items() if keep(v)] or [
        pytest.param(None, marks=pytest.mark.skip(f"no CPython {what} on this machine"))]


PYTHONS = _those(lambda v: True, "3.10+")
#: those whose layout is pyebpf's table (3.13+ publish _Py_DebugOffsets)
TABLED = _those(lambda v: v in LAYOUTS, "3.10 to 3.12")
#: those whose thread states carry the native thread id (3.11+)
THREAD_IDS = _those(lambda v: v >= (3, 11), "3.11+")


# ------------------------------------------------------------ pure checks
@pytest.mark.parametrize("exe", TABLED)
def test_layouts_match_the_interpreters_headers(exe, tmp_path):
    version = _version(exe)
    inc = glob.glob(os.path.join(os.path.dirname(os.path.dirname(exe)), "include",
                                 f"python{version[0]}.{version[1]}"))
    inc = inc or glob.glob(f"/usr/include/python{version[0]}.{version[1]}")
    if not inc or not os.path.exists(os.path.join(inc[0], "internal", "pycore_runtime.h")):
        pytest.skip(f"no headers for {exe}")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    out = tmp_path / "offsets"
    subprocess.run(["gcc", "-I", inc[0], "-o", str(out), str(HERE / "pyoffsets.c")],
                   check=True, capture_output=True)
    got = dict(line.split("=") for line in subprocess.run(
        [str(out)], capture_output=True, text=True, check=True).stdout.split())
    lay = LAYOUTS[version]
    want = {"interpreters_head": lay.interpreters_head, "interp_threads_head": lay.threads_head,
            "tstate_next": lay.ts_next, "tstate_frame": lay.ts_frame,
            "frame_back": lay.f_back, "frame_code": lay.f_code, "frame_instr": lay.f_instr,
            "code_filename": lay.code_filename, "code_name": lay.code_name,
            "code_firstlineno": lay.code_firstlineno, "code_linetable": lay.code_linetable,
            "ascii_size": lay.ascii_size, "compact_size": lay.compact_size}
    optional = {"tstate_current": lay.tstate_current,
                "tstate_native_thread_id": lay.ts_native_tid,
                "cframe_current_frame": lay.cframe_frame, "code_adaptive": lay.code_adaptive,
                "code_qualname": lay.code_qualname,
                "frame_entry": lay.f_marker, "frame_owner": lay.f_marker}
    want.update({k: v for k, v in optional.items() if k in got})
    assert {k: int(got[k]) for k in want} == want
    assert all(v is None for k, v in optional.items() if k not in got
               and k not in ("frame_entry", "frame_owner"))


_LINES = """
import json, sys
sys.path.insert(0, sys.argv[1])
src = open(sys.argv[2]).read()
out = []
def walk(co):
    out.append([co.co_linetable.hex(), co.co_firstlineno,
                [[s, line] for s, e, line in co.co_lines() for s in range(s, e, 2)]])
    for c in co.co_consts:
        if hasattr(c, "co_lines"):
            walk(c)
walk(compile(src, sys.argv[2], "exec"))
print(json.dumps(out))
"""


@pytest.mark.parametrize("exe", PYTHONS)
def test_line_tables_decode_as_the_interpreter_does(exe):
    version = _version(exe)
    out = subprocess.run([exe, "-c", _LINES, str(HERE), WORKLOAD], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    checked = 0
    for table, first, pairs in json.loads(out):
        for offset, line in pairs:
            assert decode_line(bytes.fromhex(table), first, offset, version) == line, \
                (offset, line)
            checked += 1
    assert checked > 100


def _entry(name: bytes, nstate: int, filename: bytes, table: bytes, first: int = 7,
           flags: int = 1) -> bytes:
    """A code-cache entry as the program writes it (the byte counts as the
    process holds them, the bytes cut to their bounds)."""
    head = CODE_HEAD.pack(first, flags, len(name), len(filename), len(table), nstate, 0b1100100)
    body = name[:NAME_MAX].ljust(NAME_MAX, b"\0") + filename[:FILE_MAX].ljust(FILE_MAX, b"\0")
    return (head + body + table).ljust(CODE_VALUE_SIZE, b"\0")[:CODE_VALUE_SIZE]


def test_code_cache_entries_decode_whole_cut_and_wide():
    ascii_ = 0b1100100                               # compact, ascii, kind 1
    (name, filename, table, first), whole = decode_cached_code(
        _entry(b"Outer.f", ascii_, b"/x.py", b"\x01\x02"))
    assert (name, filename, table, first, whole) == ("Outer.f", "/x.py", b"\x01\x02", 7, True)
    (name, _, _, _), whole = decode_cached_code(_entry(b"n" * 300, ascii_, b"/x.py", b""))
    assert name == "n" * NAME_MAX + "..." and not whole     # (then read from /proc if it runs)
    wide = "f\u00e9\u4e16".encode("utf-16-le")      # kind 2: two bytes a character
    (name, _, _, _), whole = decode_cached_code(_entry(wide, 0b0101000, b"/x.py", b""))
    assert name == "f\u00e9\u4e16" and whole
    assert decode_cached_code(_entry(b"f", ascii_, b"/x.py", b"", flags=0)) is None
    assert decode_line(b"\xf0\x03\x01", 1, 4000, (3, 11)) is None   # (a table cut short)


@pytest.mark.parametrize("version, frames, runs", [
    ((3, 10), [(1, 5), (2, 7)], [[(1, 5)], [(2, 7)]]),                   # one frame per call
    ((3, 11), [(1, 5), (2, 7 | 1 << 56), (3, 9)], [[(1, 5), (2, 7)], [(3, 9)]]),  # is_entry
    ((3, 12), [(1, 5), (2, 7), (9, 3 << 56), (3, 9)], [[(1, 5), (2, 7)], [(3, 9)]]),  # C shim
    ((3, 13), [(9, 3 << 56), (1, 5), (9, 3 << 56)], [[(1, 5)]]),
])
def test_frames_cut_into_eval_loop_calls(version, frames, runs):
    assert python_runs(frames, version) == runs


def test_python_runs_replace_the_eval_loop_frames_in_order():
    native = ["leaf", "_PyEval_EvalFrameDefault", "builtin_sorted", "_PyEval_EvalFrameDefault",
              "main"]
    assert interleave(native, [["key"], ["outer2", "outer1"]]) == \
        ["leaf", "key", "builtin_sorted", "outer2", "outer1", "main"]
    # a native stack cut short (no frame pointers): the rest goes outermost
    assert interleave(["leaf", "_PyEval_EvalFrameDefault"], [["key"], ["outer"]]) == \
        ["leaf", "key", "outer"]
    assert interleave(["leaf"], []) == ["leaf"]


# ------------------------------------------------------------ kernel
def under(stacks: dict, name: str) -> int:
    """Samples whose stack has a Python frame of function ``name``."""
    return sum(c for s, c in stacks.items() if any(f.startswith(name + " (") for f in s))


def python_frames(stack: tuple[str, ...]) -> list[str]:
    return [f.split(" (")[0] for f in stack if f"{WORKLOAD}:" in f]


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_python_frames_in_profiles(exe):
    proc = cli("profile", "-F", "999", "-q", "-c", f"{exe} {WORKLOAD} 4")
    assert proc.returncode == 0, proc.stderr
    stacks = parse_folded(proc.stdout)
    total = sum(stacks.values())
    assert total >= 150, proc.stdout[-3000:]
    lines = marked_lines()
    frames = {f for s in stacks for f in s}
    assert not missing_shapes(frames), (missing_shapes(frames), sorted(frames)[:40])
    # (sanity of the lines: main is only ever seen on a line of its own body)
    body = range(lines["main_start"], lines["main_end"] + 1)
    mains = [f for f in frames if f.startswith(f"main ({WORKLOAD}:")]
    assert mains and all(int(f.rsplit(":", 1)[1].rstrip(")")) in body for f in mains), mains
    ratio = under(stacks, "hot") / max(1, under(stacks, "cold"))
    assert 3 * 0.8 <= ratio <= 3 * 1.2, (ratio, under(stacks, "hot"), under(stacks, "cold"))
    walked = sum(c for s, c in stacks.items() if python_frames(s))
    assert walked >= 0.9 * total, (walked, total)
    chains = [python_frames(s) for s in stacks]
    assert any(c[:7] == ["<module>", "main"] + ["recurse"] * 5 for c in chains)
    assert any(c[:3] == ["<module>", "main", "numbers"] for c in chains)     # a generator
    assert any(c[:3] == ["<module>", "main", "by_key"] for c in chains)      # under sorted()


def _pyspy() -> str | None:
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    return exe if os.access(exe, os.X_OK) else None


def shares(stacks: dict) -> dict[str, float]:
    total = sum(stacks.values())
    return {name: under(stacks, name) / total for name in SHARES}


def _folded_file(path: str, *, py_spy: bool = False) -> dict[tuple[str, ...], int]:
    """The stacks of a folded file (py-spy's raw format: its frames as
    ``name (file:line)`` too, every line of a function merged).

    py-spy's file may hold torn stacks: with ``--nonblocking`` it reads a
    running process, and a name read mid-change may be any memory, line breaks
    included (seen: a docstring as a frame name; a "count" that was a scrap of
    binary).  The lines that do not end in a count are left out; the caller
    checks that the samples kept are most of the run's."""
    out: dict[tuple[str, ...], int] = {}
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or (py_spy and not count.isdigit()):
                continue
            frames = tuple(f.split(" (")[0] + " (x)" if py_spy else f for f in stack.split(";"))
            out[frames] = out.get(frames, 0) + int(count)
    return out


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_the_same_shares_as_py_spy(exe, tmp_path):
    """Both tools sample the same run of the workload at 999 Hz: each share
    within 5 points of py-spy's, and of the truth.  py-spy runs with
    ``--nonblocking``: stopping the process for each sample (its default)
    adds the time a stop takes to the work between two samples, longer in a
    deeper stack (recurse at 16-17% for 14% was seen); sampling the same run
    takes out the differences between runs (rounds cut short by the clock)."""
    from waiting import read_line
    spy = _pyspy()
    if spy is None:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    start = ("import sys, runpy; sys.stdin.readline(); sys.argv = ['x', '4']; "
             f"runpy.run_path({WORKLOAD!r}, run_name='__main__')")
    work = subprocess.Popen([exe, "-c", start], stdin=subprocess.PIPE)
    tools: list[subprocess.Popen[str]] = []
    try:
        ours, theirs = tmp_path / "ours.folded", tmp_path / "spy.txt"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        for argv, ready in (([sys.executable, "-m", "pyebpf", "profile", "-F", "999", "-o",
                              str(ours), "-p", str(work.pid)], "Sampling at"),
                            ([spy, "record", "--nonblocking", "-r", "999", "-f", "raw", "-o",
                              str(theirs), "-p", str(work.pid)], "py-spy> Sampling process")):
            tool = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env)
            tools.append(tool)
            assert tool.stdout is not None
            while not (line := read_line(tool.stdout, f"{argv[0]}'s start", 120)).startswith(
                    ready):
                assert line, f"{argv[0]} ended before sampling"
        assert work.stdin is not None
        work.stdin.write(b"go\n")
        work.stdin.close()
        work.wait(timeout=120)
        for tool in tools:                  # (both end with the process they sample)
            out, _ = tool.communicate(timeout=120)
            assert tool.returncode == 0, out[-2000:]
    finally:
        for proc in [work, *tools]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if not theirs.exists():
        pytest.skip(f"py-spy cannot profile {exe}")
    ours_stacks, spy_stacks = _folded_file(str(ours)), _folded_file(str(theirs), py_spy=True)
    # (both sampled the same run at the same rate: py-spy's stacks kept are most of it)
    assert sum(spy_stacks.values()) >= 0.8 * sum(ours_stacks.values()), \
        (sum(spy_stacks.values()), sum(ours_stacks.values()))
    mine, spys = shares(ours_stacks), shares(spy_stacks)
    assert max(mine, key=mine.get) == max(spys, key=spys.get) == "hot", (mine, spys)
    for name, truth in SHARES.items():
        assert abs(mine[name] - truth) <= 0.05, (name, mine, truth)
        assert abs(mine[name] - spys[name]) <= 0.05, (name, mine, spys)


@pytest.mark.kernel
def test_every_sample_taken_is_drawn_or_counted_lost():
    from pyebpf.profile.sampler import Profiler
    exe = (_pythons() or [sys.executable])[0]
    start = "import sys, runpy; sys.stdin.readline(); sys.argv = ['x', '1.5']; " \
            f"runpy.run_path({WORKLOAD!r})"
    child = subprocess.Popen([exe, "-c", start], stdin=subprocess.PIPE)
    try:
        # a tiny pid table and stack limit: the old stack-id map collided (File exists)
        with Profiler(499, pid=child.pid, max_stacks=8) as prof:
            prof.attach()
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.close()
            usage = None
            for _ in range(1200):                  # (at most a minute)
                done, _, usage = os.wait4(child.pid, os.WNOHANG)
                if done:
                    break
                prof.drain()
                time.sleep(0.05)
            prof.detach()
            stacks = prof.stacks()
            drawn = sum(stacks.values())
            assert drawn + prof.lost == prof.taken
            assert not any("File exists" in f or "Bad address" in f for s in stacks for f in s)
            if done:
                cpu = usage.ru_utime + usage.ru_stime
                assert 0.7 * 499 * cpu <= prof.taken <= 1.3 * 499 * cpu, (prof.taken, cpu)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.kernel
def test_speedscope_keeps_python_frames(tmp_path):
    exe = (_pythons() or [sys.executable])[0]
    out = tmp_path / "py.json"
    proc = cli("profile", "-F", "199", "-q", "-o", str(out), "-c", f"{exe} {WORKLOAD} 1")
    assert proc.returncode == 0, proc.stderr
    names = {f["name"] for f in json.loads(out.read_text())["shared"]["frames"]}
    assert f"hot ({WORKLOAD}:{marked_lines()['hot']})" in names, sorted(names)[:30]


@pytest.mark.kernel
def test_chromium_opens_a_python_flame_graph(tmp_path):
    exe = (_pythons() or [sys.executable])[-1]
    out = tmp_path / "py.svg"
    proc = cli("profile", "-F", "199", "-q", "-o", str(out), "-c", f"{exe} {WORKLOAD} 1")
    assert proc.returncode == 0, proc.stderr
    page = browse(f"file://{out}", "--dump-dom")
    assert page.returncode == 0, page.stderr[-2000:]
    assert "Uncaught" not in page.stderr, page.stderr[-2000:]
    assert f"hot ({WORKLOAD}:{marked_lines()['hot']})" in page.stdout


@pytest.mark.kernel
@pytest.mark.parametrize("exe", THREAD_IDS)     # (3.10's samples take the GIL holder's frames)
def test_each_thread_shows_its_own_python_frames(exe):
    script = str(HERE / "pythreads.py")
    proc = cli("profile", "-F", "499", "-q", "-c", f"{exe} {script} 2")
    assert proc.returncode == 0, proc.stderr
    stacks = parse_folded(proc.stdout)
    hashing = {s: c for s, c in stacks.items() if any("(libcrypto" in f for f in s)}
    if sum(hashing.values()) < 20:
        pytest.skip(f"{exe}'s hashlib does not hash in libcrypto here")
    mine = sum(c for s, c in hashing.items() if any(f.startswith("hashing (") for f in s))
    assert mine >= 0.8 * sum(hashing.values()), hashing
    assert not any(f.startswith("spinning (") for s in hashing for f in s), hashing


@pytest.mark.kernel
def test_an_unsupported_cpython_says_so_and_keeps_its_native_frames():
    old = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9].*/bin/python3")))
    if not old:
        pytest.skip("no CPython older than 3.10 here")
    proc = cli("profile", "-F", "199", "-c", f"{old[-1]} {WORKLOAD} 1")
    assert proc.returncode == 0, proc.stderr
    version = re.search(r"versions/(3\.\d+)", old[-1]).group(1)
    assert "no Python frames: " in proc.stderr and \
        f"CPython {version} is not supported (3.10-3.13 are)" in proc.stderr, proc.stderr
    stacks = parse_folded(proc.stdout)
    assert sum(stacks.values()) > 0
    assert not any(f"{WORKLOAD}:" in f for s in stacks for f in s)


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_a_process_gone_before_the_profile_is_read_keeps_its_names(exe):
    """The program reads code objects' names, files and line tables at sample
    time: the records are drained only after the process has exited (no
    /proc/PID/mem left to read), and its frames are still named, on the
    right lines."""
    from pyebpf.profile.sampler import Profiler
    start = "import sys, runpy; sys.stdin.readline(); sys.argv = ['x', '0.7']; " \
            f"runpy.run_path({WORKLOAD!r})"
    child = subprocess.Popen([exe, "-c", start], stdin=subprocess.PIPE)
    try:
        with Profiler(499, pid=child.pid) as prof:
            prof.attach()
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.close()
            child.wait(timeout=60)
            prof.detach()                  # (the first drain: the process is gone)
            stacks = prof.stacks()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    frames = {f for s in stacks for f in s}
    assert not any(f.startswith("[python code") for f in frames), sorted(frames)[:20]
    assert not missing_shapes(frames), (missing_shapes(frames), sorted(frames)[:40])
