"""``pystack`` in ``pyebpf bt``: the Python frames of the probed thread as a
map key, printed one frame a line (``qualname (file:line)``) and drawn by
``--flamegraph``, on every CPython 3.10+ this machine has, against a
workload of known shape (tests/profile/pyshapes.py: its ``# at:NAME``
lines); a program with no CPython to read refused with its position."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from pyworkloads import (WORKLOAD, cpythons, held, marked_lines, missing_shapes,
                         run_on_held, runtime_file)

from .harness import ROOT

VERSIONS = cpythons()
PYTHONS = list(VERSIONS) or [pytest.param(None, marks=pytest.mark.skip(
    "no CPython 3.10+ on this machine"))]


def _bt(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, cwd=str(ROOT), env=env, timeout=180)


def map_stacks(text: str) -> dict[tuple[str, ...], int]:
    """``{frames innermost first: count}`` of the ``@[pystack]`` entries printed."""
    out = {}
    for body, count in re.findall(r"^@\[\n((?:    .*\n)*)\]: (\d+)$", text, re.M):
        frames = tuple(line.strip() for line in body.splitlines())
        out[frames] = out.get(frames, 0) + int(count)
    return out


def named(stacks: dict[tuple[str, ...], int]) -> list[list[str]]:
    """Each stack's workload frames, their function names, innermost first."""
    return [[f.split(" (")[0] for f in s if f"{WORKLOAD}:" in f] for s in stacks]


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_sampled_python_stacks_name_functions_and_lines(exe):
    proc = _bt("-e", "profile:hz:499 /pid == cpid/ { @[pystack] = count(); }",
               "-c", f"{exe} {WORKLOAD} 1.5")
    assert proc.returncode == 0, proc.stderr
    stacks = map_stacks(proc.stdout)
    total = sum(stacks.values())
    assert total >= 100, proc.stdout[-2000:]
    frames = {f for s in stacks for f in s}
    # (the command exited before the map was printed: names read at sample time)
    assert not missing_shapes(frames), (missing_shapes(frames), sorted(frames)[:30])
    chains = named(stacks)
    assert any(c[-7:] == ["recurse"] * 5 + ["main", "<module>"] for c in chains), chains[:10]
    assert any(c[-4:] == ["spin", "hot", "main", "<module>"] for c in chains)
    assert any(c[-3:] == ["by_key", "main", "<module>"] for c in chains)     # under sorted()
    walked = sum(n for s, n in stacks.items() if any(f"{WORKLOAD}:" in f for f in s))
    assert walked >= 0.8 * total, (walked, total)
    # one entry per printed stack (ids that differ in the instruction only, merged)
    assert len(set(map_stacks(proc.stdout))) == len(re.findall(r"^@\[$", proc.stdout, re.M))


def _has_symbol(path: str, name: str) -> bool:
    from pyebpf import elf
    return any(s.address for s in elf.open_elf(path).find_symbols(name))


#: the interpreters whose builtin_sorted can be probed (a stripped build,
#: Debian's, keeps no static functions)
SORTED = [e for e in VERSIONS if _has_symbol(runtime_file(e), "builtin_sorted")] or [
    pytest.param(None, marks=pytest.mark.skip("no CPython 3.10+ with a symbol table here"))]


@pytest.mark.kernel
@pytest.mark.parametrize("exe", SORTED)
def test_a_uprobe_in_the_interpreter_with_the_native_stack(exe, tmp_path):
    """pystack beside ustack in a key, and in print(), at a C function
    sorted() runs, drawn as a flame graph."""
    lib = runtime_file(exe)
    program = (f"uprobe:{lib}:builtin_sorted /pid == cpid/ {{ @[pystack, ustack(1)] = count(); "
               "print(pystack); }")
    svg = tmp_path / "py.svg"
    proc = _bt("-e", program, "-c", f"{exe} {WORKLOAD} 0.5", "--flamegraph", str(svg))
    assert proc.returncode == 0, proc.stderr
    main = f"main ({WORKLOAD}:{marked_lines()['main_end']})"
    printed = re.findall(r"^\n((?:        .*\n)+)", proc.stdout, re.M)
    assert any(p.splitlines()[0].strip() == main for p in printed), proc.stdout[:1500]
    keys = re.findall(r"^@\[\n((?:    .*\n)+), \n((?:    .*\n)+)\]: (\d+)$", proc.stdout, re.M)
    assert any(py.splitlines()[0].strip() == main and "builtin_sorted" in native
               for py, native, _ in keys), proc.stdout[-2000:]
    assert re.search(r"<title>main \(" + re.escape(WORKLOAD), svg.read_text())


@pytest.mark.parametrize("args, why", [
    (["-c", "/bin/true"], "/bin/true is not a CPython (it neither defines _PyRuntime"),
    ([], "needs a CPython process: -p PID, -c CMD, or a uprobe or usdt probe"),
])
def test_no_cpython_to_read_is_a_script_error(args, why):
    proc = _bt("-e", "profile:hz:99 { @[pystack] = count(); }", *args)
    assert proc.returncode == 1, proc.stderr
    assert f"stdin:1:17-26: ERROR: pystack: {why}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.kernel
def test_an_unknown_version_is_a_script_error():
    import glob
    old = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9].*/bin/python3")))
    if not old:
        pytest.skip("no CPython older than 3.10 here")
    proc = _bt("-e", "profile:hz:99 { @[pystack] = count(); }", "-c", f"{old[-1]} -c 1")
    assert proc.returncode == 1
    assert re.search(r"ERROR: pystack: \S+ is CPython 3\.\d: pystack knows 3\.10 to 3\.13",
                     proc.stderr), proc.stderr


@pytest.mark.kernel
@pytest.mark.parametrize("how", ["-p", "the probed binary"])
def test_a_running_process_by_pid_or_by_the_probed_binary(how):
    """``-p PID``: that process's layout at the start; no pid, a uprobe in a
    CPython binary: every process running it then."""
    exe = next(iter(VERSIONS), None)
    if exe is None:
        pytest.skip("no CPython 3.10+ on this machine")
    lib = runtime_file(exe)
    child = held(exe, 1.0)
    if how == "-p":
        args = ["-e", "profile:hz:499 /pid == $1/ { @[pystack] = count(); }",
                "-p", str(child.pid), str(child.pid)]
    else:
        args = ["-e", f"uprobe:{lib}:PyObject_GetIter /pid == $1/ {{ @[pystack] = count(); }}",
                str(child.pid)]
    status, out, err = run_on_held(child, ["bt", *args], "Attaching", interrupt=how != "-p",
                                   on_stdout=True)
    assert status == 0, err
    chains = named(map_stacks(out))
    assert any(c[-2:] == ["main", "<module>"] for c in chains), out[-2000:]


@pytest.mark.kernel
def test_the_api_takes_the_command_at_start_and_leaks_nothing(no_fd_leak):
    """``lang.compile`` without a process, the command given to ``start``:
    checked then; the maps as Python data (the stack's id), no fd left."""
    from pyebpf import lang
    from pyebpf.lang.errors import LangError
    exe = next(iter(VERSIONS), None)
    if exe is None:
        pytest.skip("no CPython 3.10+ on this machine")
    prog = lang.compile("profile:hz:499 /pid == cpid/ { @[pystack] = count(); }")
    with pytest.raises(LangError, match="pystack: /bin/true is not a CPython"):
        prog.start(["/bin/true"])
    with prog.start([exe, WORKLOAD, "0.3"]) as run:
        list(run)                          # (until the command exits)
        run.stop()
        text = run.format_map("@")
        counts = run.maps()["@"]
    assert sum(counts.values()) >= 20 and all(isinstance(k, int) for k in counts)
    assert f"main ({WORKLOAD}:" in text


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_a_code_object_made_where_a_freed_one_was_keeps_its_own_name(exe):
    """tests/profile/pyreuse.py runs alpha(), frees it, makes functions until
    one's code object lands at alpha's address, runs that one (betaa): the
    code-object cache must not name betaa's samples after alpha (an entry
    keyed by the address alone did)."""
    reuse = str(ROOT / "tests" / "profile" / "pyreuse.py")
    proc = _bt("-e", "profile:hz:499 /pid == cpid/ { @[pystack] = count(); }",
               "-c", f"{exe} {reuse} 0.3")
    assert proc.returncode == 0, proc.stderr
    assert "reused" in proc.stdout.splitlines(), proc.stdout[:300]
    frames = {f.split(" (")[0] for s in map_stacks(proc.stdout) for f in s
              if "(reuse.py:" in f}
    assert frames - {"<module>"} == {"alpha", "betaa"}, proc.stdout[-2000:]   # (made()'s exec)
