"""``pyebpf bt``'s compiled-program cache (:mod:`pyebpf.lang.btcache`, run
by :mod:`pyebpf.lang.fastpath`): a program run twice prints the same the
second time, when it comes from the cache (no compiler module imported);
a changed or vanished binary, a corrupt or foreign entry, ``--no-cache``
and ``PYEBPF_NO_CACHE`` all go the compiler's way."""
from __future__ import annotations

import marshal
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pyebpf.lang import btcache

from .harness import ROOT, bt_workload

#: printed on stderr once the probes are attached (bpftrace's test-suite signal)
NOTIFY = "__BPFTRACE_NOTIFY_PROBES_ATTACHED"
#: a module of the compiler: imported on a miss, never on a hit
COMPILER = "pyebpf.lang.parser"


def _bt(cache: Path, program: str, *args: str, work: str | None = None,
        work_args: tuple[str, ...] = ("60", "0"),
        exits: bool = False) -> tuple[int, str, str, bool]:
    """Run ``pyebpf bt -e program`` with its cache in ``cache``; once its
    probes are attached run ``work`` (when given) and stop it with SIGINT
    -- unless it exited by itself, or, ``exits``, will (its exit() comes
    from the work: a SIGINT before it has read that far would discard the
    events still in the ring, and the run print fewer than another).
    ``(status, stdout, stderr, compiled)``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache))
    env[NOTIFY] = "1"
    env.pop("PYEBPF_NO_CACHE", None)
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "pyebpf", "bt", *args,
                             "-e", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(ROOT))
    try:
        assert proc.stderr is not None
        err = []
        for line in proc.stderr:            # (the imports' lines come first)
            if line.startswith(NOTIFY):
                break
            err.append(line)
        else:                                # ended before attaching: an error
            out, rest = proc.communicate(timeout=60)
            return proc.returncode, out, _errors("".join(err) + rest), COMPILER in "".join(err)
        if work is not None:
            subprocess.run([work, *work_args], capture_output=True, timeout=60, check=True)
        if proc.poll() is None and not exits:
            proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, _errors("".join(err) + rest), COMPILER in "".join(err)


def _errors(stderr: str) -> str:
    return "".join(ln for ln in stderr.splitlines(keepends=True)
                   if not ln.startswith("import time:"))


def _entries(cache: Path) -> list[Path]:
    folder = cache / "pyebpf" / "bt"
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.fixture
def work(tmp_path: Path) -> str:
    """A copy of the workload of this test's own (a test may change it)."""
    copy = tmp_path / "btworkload"
    shutil.copy2(bt_workload(), copy)
    return str(copy)


def _programs(w: str) -> dict[str, str]:
    return {
        "aggregations": (
            f'BEGIN {{ printf("go %d %s\\n", 5, "x"); }} '
            f'uprobe:{w}:compute {{ @c[arg0 % 8] = count(); @h = hist(arg1); '
            f'@hk[arg0 & 1] = hist(arg1); @s[arg0 & 1] = stats(arg1); @mx = max(arg1); '
            f'@mn[comm] = min(arg1); @a = avg(arg1); @su = sum(arg0); @neg = sum(-arg0); '
            f'@l[arg0 & 1] = lhist(arg1, 0, 5000, 1000); @l1 = lhist(arg1, 0, 5000, 700); '
            f'@p[probe] = count(); @v = arg0; @t[arg0, "k"] = (arg1, comm); }} '
            f'uretprobe:{w}:compute {{ @r[retval % 3] = count(); }} '
            f'END {{ zero(@hk); clear(@h); zero(@v); clear(@t); zero(@s); clear(@l1); }}'),
        # (exit() at the last call with arg0 == 9: nothing after it races the detaching)
        "actions": (
            f'BEGIN {{ @b = 7; print(@b); printf("%s|%5d|%-4x|%c\\n", "str", 42, 255, 65); '
            f'time("%Y"); printf("\\n"); }} '
            f'uprobe:{w}:compute /arg0 == 3/ {{ @n[arg1 % 4] = count(); @z = count(); '
            f'printf("%d %s\\n", arg0, probe); print(arg1 > 0); }} '
            f'uprobe:{w}:compute /arg0 == 9 && @x < 6/ {{ @x++; if (@x == 6) {{ printf("bye\\n"); '
            f'exit(); }} }} '
            f'END {{ print(@n); zero(@z); clear(@n); print(@z); print(@n); '
            f'printf("end %d\\n", @x); }}'),
        "nothing": f"uprobe:{w}:lock_a {{ @ = count(); }} END {{ print(@); }}",
    }


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["aggregations", "actions", "nothing"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_cached_program_prints_what_the_compiled_one_printed(
        tmp_path: Path, work: str, name: str, fmt: str) -> None:
    program = _programs(work)[name]
    if name == "nothing":
        work_args: tuple[str, ...] = ("0",)
    else:
        work_args = ("60", "0")
    exits = name == "actions"
    cold = _bt(tmp_path / "cache", program, "-f", fmt, work=work, work_args=work_args,
               exits=exits)
    assert cold[0] == 0, cold[2]
    assert cold[3], "the first run compiles"
    assert len(_entries(tmp_path / "cache")) == 1
    warm = _bt(tmp_path / "cache", program, "-f", fmt, work=work, work_args=work_args,
               exits=exits)
    assert not warm[3], "the second run comes from the cache"
    assert warm[:3] == cold[:3]
    assert cold[1].count("\n") > 3


#: what a run from the cache imports none of: the compiler, the ELF reader, the
#: kernel layer's object modules (the cffi declaration alone makes the calls)
NOT_ON_A_HIT = ("pyebpf.lang.lexer", "pyebpf.lang.parser", "pyebpf.lang.sema",
                "pyebpf.lang.codegen", "pyebpf.elf", "pyebpf.trace", "pyebpf.loader",
                "pyebpf.maps", "pyebpf.events", "pyebpf.program", "pyebpf.kernel.prog",
                "pyebpf.kernel.mapops", "hashlib", "typing", "re", "enum", "argparse")


@pytest.mark.kernel
def test_a_hit_imports_only_what_it_runs(tmp_path: Path, work: str) -> None:
    program = f'BEGIN {{ printf("go\\n"); exit(); }} uprobe:{work}:compute {{ @[1] = count(); }}'
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache))
    env.pop("PYEBPF_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-X", "importtime", "-m", "pyebpf", "bt", "-e",
                            program], capture_output=True, text=True, timeout=60, env=env,
                           cwd=str(ROOT)) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout == "Attaching 2 probes...\ngo\n\n\n\n", \
        runs[1].stderr[-2000:]
    names = {ln.rsplit("|", 1)[-1].strip() for ln in runs[1].stderr.splitlines()}
    assert "pyebpf.lang.fastpath" in names
    assert not {n for n in names if n.split(".")[0] in NOT_ON_A_HIT
                or n.startswith(tuple(m + "." for m in NOT_ON_A_HIT)) or n in NOT_ON_A_HIT}, \
        sorted(names)


@pytest.mark.kernel
def test_a_changed_binary_is_compiled_again(tmp_path: Path, work: str) -> None:
    program = f"uprobe:{work}:compute {{ @ = count(); }}"
    cache = tmp_path / "cache"
    first = _bt(cache, program, work=work)
    assert first[3] and first[0] == 0
    os.utime(work, ns=(os.stat(work).st_atime_ns, os.stat(work).st_mtime_ns + 10**9))
    again = _bt(cache, program, work=work)
    assert again[3], "a binary changed since must not come from the cache"
    assert again[:3] == first[:3]
    assert not _bt(cache, program, work=work)[3]          # (stored again, for the new one)


@pytest.mark.kernel
def test_a_vanished_binary_is_the_compilers_error(tmp_path: Path, work: str) -> None:
    program = f'BEGIN {{ printf("hi\\n"); }} uprobe:{work}:compute {{ @ = count(); }}'
    cache = tmp_path / "cache"
    assert _bt(cache, program, work=work)[0] == 0
    os.unlink(work)
    gone = _bt(cache, program)
    uncached = _bt(cache, program, "--no-cache")
    assert gone[3] and gone[0] != 0
    assert gone[:3] == uncached[:3]
    assert work in gone[2]


@pytest.mark.kernel
def test_corrupt_and_foreign_entries_are_ignored(tmp_path: Path, work: str) -> None:
    program = f'BEGIN {{ printf("hi\\n"); exit(); }} uprobe:{work}:compute {{ @ = count(); }}'
    cache = tmp_path / "cache"
    good = _bt(cache, program)
    (entry,) = _entries(cache)
    for junk in (b"", b"\x00garbage", marshal.dumps({"key": ("other",), "files": []}),
                 marshal.dumps([1, 2]), entry.read_bytes()[:-40]):
        entry.write_bytes(junk)
        got = _bt(cache, program)
        assert got[3], junk[:20]
        assert got[:3] == good[:3]
    assert not _bt(cache, program)[3]        # (the bad entry was written over)


@pytest.mark.kernel
def test_an_entry_others_may_write_is_not_trusted(tmp_path: Path, work: str) -> None:
    """An entry's code is loaded into the kernel: a file or folder another
    user could have written (group/other-writable) is compiled over, never run."""
    program = f'BEGIN {{ printf("hi\\n"); exit(); }} uprobe:{work}:compute {{ @ = count(); }}'
    cache = tmp_path / "cache"
    good = _bt(cache, program)
    (entry,) = _entries(cache)
    assert not _bt(cache, program)[3]        # (a hit)
    entry.chmod(0o666)
    got = _bt(cache, program)
    assert got[3] and got[:3] == good[:3]
    entry.chmod(0o600)
    entry.parent.chmod(0o777)
    got = _bt(cache, program)
    assert got[3] and got[:3] == good[:3]
    assert _entries(cache) == [entry]        # (nothing written into that folder either)


@pytest.mark.kernel
def test_no_cache_and_its_variable_store_nothing(tmp_path: Path, work: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    program = f'BEGIN {{ printf("hi\\n"); exit(); }} uprobe:{work}:compute {{ @ = count(); }}'
    cache = tmp_path / "cache"
    assert _bt(cache, program, "--no-cache")[3]
    assert not _entries(cache)
    monkeypatch.setenv("PYEBPF_NO_CACHE", "1")
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache))
    proc = subprocess.run([sys.executable, "-m", "pyebpf", "bt", "-e", program],
                          capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))
    assert proc.returncode == 0 and proc.stdout.startswith("Attaching 2 probes...\nhi\n")
    assert not _entries(cache)
    _bt(cache, program)
    (entry,) = _entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700


@pytest.mark.kernel
def test_programs_the_fast_path_does_not_run_are_not_stored(tmp_path: Path, work: str) -> None:
    cache = tmp_path / "cache"
    for program, args in ((f"uprobe:{work}:compute {{ @[ustack] = count(); exit(); }}", ()),
                          ("interval:ms:10 { exit(); }", ()),
                          (f"uprobe:{work}:compute {{ @ = count(); exit(); }}", ("-k",)),
                          (f"uprobe:{work}:compute {{ @ = elapsed; exit(); }}", ())):
        assert _bt(cache, program, *args, work=work)[0] == 0
    assert not _entries(cache)


def test_the_least_recently_used_entries_go_beyond_the_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(btcache, "MAX_ENTRIES", 3)
    keys = [("k", i) for i in range(5)]
    for i, key in enumerate(keys[:3]):
        btcache.store(key, {"files": [], "n": i})
        path = Path(btcache._path(key))
        os.utime(path, ns=(10**18 + i, 10**18 + i))      # (written in this order)
    assert btcache.load(keys[0])["n"] == 0                # (used: now the most recent)
    for key in keys[3:]:
        btcache.store(key, {"files": [], "n": 3})
    assert len(list((tmp_path / "pyebpf" / "bt").iterdir())) == 3
    assert [btcache.load(k) is not None for k in keys] == [True, False, False, True, True]


def test_a_changed_stamp_of_a_file_is_a_miss(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    probed = tmp_path / "binary"
    probed.write_bytes(b"one")
    st = probed.stat()
    btcache.store(("k",), {"files": [(str(probed), (st.st_dev, st.st_ino, st.st_size,
                                                    st.st_mtime_ns))]})
    assert btcache.load(("k",)) is not None
    probed.write_bytes(b"three")
    assert btcache.load(("k",)) is None


def test_stack_and_symbol_types_are_not_stored() -> None:
    """A value whose printing needs the run's symbols or stacks (pystack: the
    Python frames read from the traced processes) makes no entry."""
    from pyebpf.lang.btcache import _Uncacheable, encode_type
    from pyebpf.lang.types import Type, tuple_type
    for kind in ("ustack", "kstack", "usym", "ksym", "pystack"):
        with pytest.raises(_Uncacheable):
            encode_type(Type(kind, 8))
        with pytest.raises(_Uncacheable):
            encode_type(tuple_type([Type("int", 8), Type(kind, 8)]))
    assert encode_type(Type("int", 8)) is not None
