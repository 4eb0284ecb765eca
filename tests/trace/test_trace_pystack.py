"""``pystack`` in ``pyebpf trace``'s flags and the Python ``Trace`` API: a
key of ``--count`` (alone, in a tuple, in ``--by``), a field of ``--print``,
in text, table and JSON output, with ``-c``, ``-p`` and the probed binary
naming the CPython to read -- printed as Python frames, as ``ustack`` is as
native ones; no CPython to read is an error at the flag's position.  Against
the workload of known shape (tests/profile/pyshapes.py) under a real CPython,
probed where the interpreter calls ``PyObject_GetIter`` (in every ``for``)."""
from __future__ import annotations

import json
import re

import pytest

from pyworkloads import WORKLOAD, cpythons, held, marked_lines, run_on_held, runtime_file

from .conftest import cli

VERSIONS = cpythons()
PYTHONS = list(VERSIONS) or [pytest.param(None, marks=pytest.mark.skip(
    "no CPython 3.10+ on this machine"))]


def _probe(exe: str) -> str:
    return f"uprobe:{runtime_file(exe)}:PyObject_GetIter"


def _newest() -> str:
    if not VERSIONS:
        pytest.skip("no CPython 3.10+ on this machine")
    return max(VERSIONS, key=VERSIONS.__getitem__)


def _text_stacks(text: str) -> dict[tuple[str, ...], int]:
    """``{frames innermost first: count}`` of bpftrace-style ``@[stack]: N`` entries."""
    out: dict[tuple[str, ...], int] = {}
    for body, count in re.findall(r"^@\[\n((?:    .*\n)*)\]: (\d+)$", text, re.M):
        frames = tuple(line.strip() for line in body.splitlines())
        out[frames] = out.get(frames, 0) + int(count)
    return out


def _names(frames: tuple[str, ...] | list[str]) -> list[str]:
    """The workload's frames of a stack, by function name, innermost first."""
    return [f.split(" (")[0] for f in frames if f"{WORKLOAD}:" in f]


def _shapes_seen(chains: list[list[str]]) -> None:
    """The workload's call chains, each in its place (innermost first: the
    probe fires in spin()'s ``for``)."""
    seen = [c for c in chains if c]
    assert ["spin", "hot", "main", "<module>"] in seen, seen[:10]
    assert ["spin"] + ["recurse"] * 5 + ["main", "<module>"] in seen, seen[:10]
    assert ["spin", "numbers", "main", "<module>"] in seen, seen[:10]


@pytest.mark.kernel
@pytest.mark.parametrize("exe", PYTHONS)
def test_count_by_pystack_prints_python_frames(exe):
    proc = cli("trace", _probe(exe), "--count", "pystack", "-q", "-c", f"{exe} {WORKLOAD} 0.3",
               timeout=120)
    assert proc.returncode == 0, proc.stderr
    stacks = _text_stacks(proc.stdout)
    assert sum(stacks.values()) >= 20, proc.stdout[-2000:]
    _shapes_seen([_names(s) for s in stacks])
    lines = marked_lines()
    assert f"hot ({WORKLOAD}:{lines['hot']})" in {f for s in stacks for f in s}
    # one entry per stack as printed (ids differing in an instruction within a line: merged)
    assert len(stacks) == len(re.findall(r"^@\[$", proc.stdout, re.M))


@pytest.mark.kernel
def test_pystack_in_a_tuple_key_by_and_json():
    exe = _newest()
    proc = cli("trace", _probe(exe), "--count", "comm, pystack", "--hist", "cpu",
               "--by", "pystack", "--json", "-q", "-c", f"{exe} {WORKLOAD} 0.3", timeout=120)
    assert proc.returncode == 0, proc.stderr
    maps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    counts = next(m["data"]["@count"] for m in maps if "@count" in m.get("data", {}))
    hists = next(m["data"]["@hist"] for m in maps if "@hist" in m.get("data", {}))
    # (JSON's stack keys: frames outermost first, joined by ';', as folded stacks)
    chains = [_names(list(reversed(k.split(", ", 1)[1].split(";")))) for k in counts]
    _shapes_seen(chains)
    assert all(k.startswith("python3, ") for k in counts), list(counts)[:5]
    _shapes_seen([_names(list(reversed(k.split(";")))) for k in hists])


@pytest.mark.kernel
def test_pystack_as_an_event_field_and_in_a_table():
    exe = _newest()
    proc = cli("trace", _probe(exe), "--print", "pid", "pystack", "-q", "-c",
               f"{exe} {WORKLOAD} 0.2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("PID     PYSTACK\n"), proc.stdout[:300]
    assert re.search(r"^\s+hot \(" + re.escape(WORKLOAD) + r":\d+\)$", proc.stdout, re.M), \
        proc.stdout[:3000]
    assert not re.search(r"^\d+\s+\d+$", proc.stdout, re.M)          # (no bare ids)
    table = cli("trace", _probe(exe), "--count", "pystack", "--table", "-q", "-c",
                f"{exe} {WORKLOAD} 0.2", timeout=120)
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.splitlines() if " / " in line]
    chains = [_names(line.rsplit(None, 1)[0].split(" / ")) for line in rows]
    _shapes_seen(chains)


@pytest.mark.kernel
@pytest.mark.parametrize("how", ["-p", "the probed binary"])
def test_a_running_process_by_pid_or_by_the_probed_binary(how):
    """``-p PID``: that process's CPython; no pid, a uprobe in a CPython
    binary: the processes running it when the trace starts."""
    exe = _newest()
    args = ["trace", _probe(exe), "--count", "pystack"]
    child = held(exe, 0.3)
    args += ["-p", str(child.pid)] if how == "-p" else ["--filter", f"pid == {child.pid}"]
    status, out, err = run_on_held(child, args, "Attached", interrupt=how != "-p")
    assert status == 0, err
    _shapes_seen([_names(s) for s in _text_stacks(out)])


@pytest.mark.kernel
def test_the_trace_api_keys_counts_by_python_frames(no_fd_leak):
    from pyebpf.trace import Trace
    exe = _newest()
    child = held(exe, 0.3)
    try:
        with Trace(_probe(exe), pid=child.pid).count(by="pystack").start() as session:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.close()
            child.wait(timeout=60)
            counts = session.counts()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert all(isinstance(k[0], tuple) for k in counts), list(counts)[:3]
    _shapes_seen([_names(k[0]) for k in counts])


@pytest.mark.parametrize("args, why", [
    (["-c", "/bin/true"], "pystack: /bin/true is not a CPython (it neither defines _PyRuntime"),
    ([], "pystack: needs a CPython process: -p PID, -c CMD, or a uprobe or usdt probe"),
])
def test_no_cpython_to_read_is_an_error_at_the_flag(args, why):
    proc = cli("trace", "tracepoint:syscalls:sys_enter_getppid", "--count", "pystack", *args)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"ERROR: {why}" in proc.stderr, proc.stderr
    assert "@[pystack] = count();\n  ~~~~~~~~~" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
