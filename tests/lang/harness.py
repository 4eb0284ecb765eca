"""The comparison harness: the same bpftrace program run by the installed
bpftrace (0.17) and by ``python -m pyebpf bt``, on the same deterministic
workload, and their outputs compared.

::

    from .harness import bt_workload, compare_with_bpftrace
    w = bt_workload()
    compare_with_bpftrace('usdt:%s:btw:delta { @d[arg1] = count(); }' % w,
                          command=f"{w} 40 100")

What is compared: stdout without bpftrace's ``Attaching N probes...`` line
(the issue lets it differ). Lines of one map that have the same value are
sorted first: bpftrace prints ties in hash order. The workload's own output
(``done N``) is dropped from both. Tests skip when bpftrace or gcc is
missing, and the pyebpf side skips while ``pyebpf bt`` does not exist.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = HERE.parent / "build" / "lang"
WORKLOAD_C = HERE / "btworkload.c"
#: how btworkload is built: USDT arguments in registers, frame pointers kept
CFLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-pthread"]
HOSTS = ["alpha.example", "beta", "gamma.test"]
PATHS = ["/index.html", None, "/api/v1/items", "/x"]
_ATTACHING = re.compile(r"^Attaching \d+ probes?\.\.\.$")
_MAP_LINE = re.compile(r"^(@[A-Za-z0-9_]*)(\[.*\])?: (.*)$")


def bt_workload() -> str:
    """tests/lang/btworkload.c built (once, again when the source is newer)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / "btworkload"
    if not out.exists() or out.stat().st_mtime < WORKLOAD_C.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        proc = subprocess.run(["gcc", *CFLAGS, "-o", str(tmp), str(WORKLOAD_C)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            if "sys/sdt.h" in proc.stderr:
                pytest.skip("sys/sdt.h is not installed (systemtap-sdt-dev)")
            raise AssertionError(f"building btworkload failed:\n{proc.stderr}")
        os.replace(tmp, out)
    return str(out)


def build_c(name: str, source: str, *flags: str) -> str:
    """The C program ``source`` built as ``BUILD/name`` with gcc ``flags``
    (skips without gcc, or without sys/sdt.h when it includes it)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    src, out = BUILD / f"{name}.c", BUILD / name
    src.write_text(source)
    proc = subprocess.run(["gcc", *flags, "-o", str(out), str(src)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        if "sys/sdt.h" in proc.stderr:
            pytest.skip("sys/sdt.h is not installed (systemtap-sdt-dev)")
        raise AssertionError(f"building {name} failed:\n{proc.stderr}")
    return str(out)


def expected_requests(n: int) -> list[tuple[str, str | None]]:
    """(host, path) of each btw:request of ``btworkload n`` (path None: NULL)."""
    return [(HOSTS[i % 3], PATHS[i % 4]) for i in range(n)]


def expected_deltas(n: int) -> list[tuple[int, int, int]]:
    """(i, d, small) of each btw:delta of ``btworkload n``."""
    return [(i, i % 7 - 3, -(i % 5)) for i in range(n)]


def _clean(text: str, drop: tuple[str, ...] = ("done ",)) -> str:
    lines = [ln for ln in text.split("\n")
             if not _ATTACHING.match(ln) and not ln.startswith(drop)]
    return "\n".join(lines)


def run_bpftrace(program: str, *args: str, command: str | None = None,
                 timeout: float = 120, cwd: str | None = None) -> str:
    """bpftrace's stdout for ``program`` (``-c command`` when given; run in
    ``cwd``), without its ``Attaching`` line; skips when bpftrace is not
    installed."""
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    cmd = ["bpftrace", *args, "-e", program] + (["-c", command] if command else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          errors="surrogateescape", cwd=cwd)
    if proc.returncode != 0:
        raise AssertionError(f"bpftrace failed ({proc.returncode}):\n{proc.stderr}")
    return _clean(proc.stdout)


def pyebpf_bt_available() -> str | None:
    """None when ``pyebpf bt`` exists in this checkout, else why not."""
    try:
        import importlib
        importlib.import_module("pyebpf.cli.bt")
    except ImportError as exc:
        return f"`pyebpf bt` is not built yet (pyebpf.cli.bt: {exc})"
    return None


def run_pyebpf_bt(program: str, *args: str, command: str | None = None,
                  timeout: float = 120, cwd: str | None = None) -> str:
    """``python -m pyebpf bt`` (this checkout) on ``program`` (run in ``cwd``,
    default the checkout): its stdout without an ``Attaching`` line; skips
    while ``pyebpf bt`` is missing."""
    why = pyebpf_bt_available()
    if why:
        pytest.skip(why)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "pyebpf", "bt", *args, "-e", program] + \
        (["-c", command] if command else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd or str(ROOT), errors="surrogateescape")
    if proc.returncode != 0:
        raise AssertionError(f"pyebpf bt failed ({proc.returncode}):\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return _clean(proc.stdout)


def normalize(text: str) -> str:
    """``text`` with each run of consecutive lines of one map that print the
    same value sorted (bpftrace prints such ties in hash order); JSON map
    lines get their ties sorted the same way."""
    lines = text.split("\n")
    out: list[str] = []
    run: list[str] = []
    run_key: tuple[str, str] | None = None

    def flush() -> None:
        out.extend(sorted(run))
        run.clear()

    for ln in lines:
        m = _MAP_LINE.match(ln)
        key = (m.group(1), m.group(3)) if m and m.group(2) else None
        if key is None or key != run_key:
            flush()
            run_key = key
        if key is None:
            out.append(_normalize_json(ln))
        else:
            run.append(ln)
    flush()
    return "\n".join(out)


def _normalize_json(line: str) -> str:
    """A ``-f json`` map line with its keys in (value, key) order."""
    if not line.startswith('{"type": "map"'):
        return line
    import json
    obj = json.loads(line)
    data = obj["data"]
    for name, body in data.items():
        if isinstance(body, dict):
            data[name] = dict(sorted(body.items(), key=lambda kv: (str(kv[1]), kv[0])))
    return json.dumps(obj)


def compare_with_bpftrace(program: str, *args: str, command: str | None = None,
                          exact: bool = False, cwd: str | None = None) -> str:
    """Run ``program`` with bpftrace and with ``pyebpf bt`` (same arguments,
    ``-c command``, directory) and assert their outputs are equal (ties
    sorted unless ``exact``); returns bpftrace's."""
    theirs = run_bpftrace(program, *args, command=command, cwd=cwd)
    ours = run_pyebpf_bt(program, *args, command=command, cwd=cwd)
    if not exact:
        theirs, ours = normalize(theirs), normalize(ours)
    assert ours == theirs, (f"pyebpf bt and bpftrace differ on:\n{program}\n"
                            f"--- bpftrace\n{theirs}\n--- pyebpf\n{ours}")
    return theirs
