"""Every public class that owns kernel objects has one lifetime (issue 13 §5):
closing by ``close()``, by ``with`` and by garbage collection releases its
fds and the kernel objects they hold; ``closed`` turns True; closing twice
is harmless; the repr says ``closed``."""
from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from kernel_objects import alive_ids, bpf_ids
from waiting import poll_until
from pyebpf.kernel.lifetime import Owner

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parent.parent.parent

GETPPID = "syscalls:sys_enter_getppid"


def _program(name: str = "lifetime") -> Any:
    from pyebpf.program import R0, Program
    p = Program(name)
    p.mov(R0, 0)
    p.exit()
    return p


@pytest.fixture(scope="module")
def provider():
    """A loaded USDT provider the USDT recipes attach to (its own fds are
    opened before any count is taken)."""
    from pyebpf.usdt import Provider
    app = Provider("lifetimes")
    app.probe("tick", "u64")
    with app:
        yield app


def _maps() -> dict[str, Callable[[Any], Any]]:
    from pyebpf import maps as m
    return {
        "HashMap": lambda _: m.HashMap("u32", "u64", 8),
        "LruHashMap": lambda _: m.LruHashMap("u32", "u64", 8),
        "ArrayMap": lambda _: m.ArrayMap("u64", 4),
        "PerCpuHashMap": lambda _: m.PerCpuHashMap("u32", "u64", 8),
        "LruPerCpuHashMap": lambda _: m.LruPerCpuHashMap("u32", "u64", 8),
        "PerCpuArrayMap": lambda _: m.PerCpuArrayMap("u64", 4),
        "PerfEventArray": lambda _: m.PerfEventArray(),
        "RingBuf": lambda _: m.RingBuf(4096),
        "StackTraceMap": lambda _: m.StackTraceMap(8),
        "QueueMap": lambda _: m.QueueMap("u64", 4),
        "StackMap": lambda _: m.StackMap("u64", 4),
    }


def _fd(_: Any) -> Any:
    from pyebpf.kernel.core import Fd
    return Fd(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))


def _loaded(_: Any) -> Any:
    from pyebpf.loader import load
    return load(_program(), "socket_filter")


def _link(_: Any) -> Any:
    from pyebpf.attach import attach_tracepoint
    return attach_tracepoint(_program(), GETPPID)       # the link loads and owns it


def _perf_buffer(_: Any) -> Any:
    from pyebpf.events import PerfBuffer
    return PerfBuffer(size=4096)


def _ring_reader(_: Any) -> Any:
    from pyebpf.events import RingBufferReader
    return RingBufferReader(size=4096, drops=True)


def _provider(_: Any) -> Any:
    from pyebpf.usdt import Provider
    app = Provider("lifetime_own")
    app.probe("evt", "u32")
    return app.load()


def _usdt_counter(provider: Any) -> Any:
    return provider.usdt("tick").count()


def _usdt_trace(provider: Any) -> Any:
    return provider.usdt("tick").trace(size=4096)


def _session(_: Any) -> Any:
    from pyebpf.trace import Trace
    return Trace(f"tracepoint:{GETPPID}", pid=os.getpid()).count().start()


def _flag_session(_: Any) -> Any:
    """``pyebpf trace``'s session: the flags' program, loaded and attached."""
    from pyebpf.lang.flags import Question
    from pyebpf.lang.flagsession import FlagTrace
    q = Question([f"tracepoint:{GETPPID}"], pid=os.getpid()).add("count", None)
    q.print(None, ["pid"])
    return FlagTrace(q).start(None)


def _asm_session(_: Any) -> Any:
    from pyebpf.session.asmfile import AsmSession, parse_asm_file
    path = ROOT / "asm" / "execsnoop.s"
    return AsmSession(parse_asm_file(path.read_text(), str(path)), pid=os.getpid())


def _aggregations() -> dict[str, Callable[[Any], Any]]:
    from pyebpf.lang import aggregations as a
    return {cls.__name__: (lambda _, cls=cls: cls(keyed=True))
            for cls in (a.Count, a.Sum, a.Min, a.Max, a.Stats, a.Avg, a.Histogram)}


def _child(_: Any) -> Any:
    from pyebpf.session.live import Child
    child = Child(["true"])
    child.go()                       # (the pipes are closed by then: the pidfd stays)
    child.wait()
    return child


def _process_watch(_: Any) -> Any:
    from pyebpf.session.live import _ProcessWatch
    return _ProcessWatch(os.getpid())


def _bt_run(_: Any) -> Any:
    """A started bpftrace-language program (maps, programs, links, ring reader)."""
    from pyebpf.lang.api import compile
    return compile(f"tracepoint:{GETPPID} {{ @calls = count(); }}", pid=os.getpid()).start()


def _fast_run(_: Any) -> Any:
    """A program started from a compiled-program cache entry (pyebpf.lang.fastpath)."""
    from pyebpf.lang import btcache, fastpath
    from pyebpf.lang.api import compile
    text = "BEGIN { @calls = count(); @s[1] = sum(2); }"
    with compile(text).start() as run:
        entry = btcache.entry_of(run, [])
    assert entry is not None
    return fastpath.CachedProgram(entry, (text, "stdin", [], False)).start()


def _profiler(_: Any) -> Any:
    """A sampling profiler attached to this process (maps, perf links)."""
    from pyebpf.profile.sampler import Profiler
    prof = Profiler(49, pid=os.getpid())
    prof.attach()
    return prof


_OBJECT_C = b"""
typedef unsigned int u32;
struct { int (*type)[1]; int (*max_entries)[4]; u32 *key; u32 *value; }
    counts __attribute__((section(".maps"), used));
u32 hits = 0;
__attribute__((section("socket"), used)) int count(void *ctx) { hits++; return 0; }
char LICENSE[] __attribute__((section("license"), used)) = "GPL";
"""


def _bpf_object(_: Any) -> Any:
    """A loaded clang-built object (maps, .bss, BTF, a program)."""
    import shutil
    import subprocess
    import tempfile

    import pyebpf
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("clang builds the object")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "o.o")
        subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-x", "c", "-", "-c", "-o", out],
                       input=_OBJECT_C, check=True, capture_output=True)
        return pyebpf.load_object(out)


OWNERS: dict[str, Callable[[Any], Any]] = {
    "BpfObject": _bpf_object,
    "Fd": _fd, **_maps(), "LoadedProgram": _loaded, "Link": _link,
    "PerfBuffer": _perf_buffer, "RingBufferReader": _ring_reader, "Provider": _provider,
    "UsdtCounter": _usdt_counter, "UsdtTrace": _usdt_trace,
    "TraceSession": _session, "FlagSession": _flag_session, "AsmSession": _asm_session, **_aggregations(), "Child": _child,
    "_ProcessWatch": _process_watch, "BtRun": _bt_run, "FastRun": _fast_run,
    "Profiler": _profiler,
}


def _fds() -> set[int]:
    return set(os.listdir("/proc/self/fd"))


def _held() -> dict[str, set[int]]:
    return bpf_ids(os.getpid())


def _acquire(make: Callable[[Any], Any], provider: Any) -> tuple[Any, set[str],
                                                                   dict[str, set[int]]]:
    """The new owner, the fds it opened and the ids of the kernel objects they hold."""
    gc.collect()
    fds, held = _fds(), _held()
    obj = make(provider)
    new_fds = _fds() - fds
    new_ids = {kind: ids - held[kind] for kind, ids in _held().items()}
    assert new_fds, f"{obj!r} opened no fd: the test would prove nothing"
    return obj, new_fds, new_ids


def _assert_released(new_fds: set[str], new_ids: dict[str, set[int]]) -> None:
    gc.collect()
    left = new_fds & _fds()
    assert not left, f"fds left open: {sorted(left)}"
    assert not any(ids & _held()[k] for k, ids in new_ids.items())
    # the kernel frees a map/program/link once its last reference is gone (deferred)
    assert poll_until(lambda: not alive_ids(new_ids), 10), alive_ids(new_ids)


def _assert_closed(obj: Any) -> None:
    assert isinstance(obj, Owner)
    assert obj.closed
    obj.close()                                    # harmless the second time
    assert obj.closed
    assert "closed" in repr(obj), repr(obj)


@pytest.mark.parametrize("kind", sorted(OWNERS))
def test_close_releases(kind, provider):
    obj, fds, ids = _acquire(OWNERS[kind], provider)
    assert not obj.closed and "closed" not in repr(obj)
    obj.close()
    _assert_closed(obj)
    _assert_released(fds, ids)


@pytest.mark.parametrize("kind", sorted(OWNERS))
def test_with_releases(kind, provider):
    obj, fds, ids = _acquire(OWNERS[kind], provider)
    with obj as entered:
        assert entered is obj and not obj.closed
    _assert_closed(obj)
    _assert_released(fds, ids)


@pytest.mark.parametrize("kind", sorted(OWNERS))
def test_garbage_collection_releases(kind, provider):
    obj, fds, ids = _acquire(OWNERS[kind], provider)
    del obj
    _assert_released(fds, ids)


#: owners made only through another one, or bases: what covers them
COVERED = {"FdOwner": "Map, LoadedProgram", "Map": "every map kind", "Session": "TraceSession, "
           "AsmSession", "Aggregation": "every aggregation kind",
           "_Reader": "PerfBuffer, RingBufferReader", "_Recipe": "UsdtCounter, UsdtTrace",
           "_Map": "FastRun (its maps)"}


def _owner_classes() -> set[type]:
    import importlib
    import pkgutil

    import pyebpf
    for m in pkgutil.walk_packages(pyebpf.__path__, "pyebpf."):
        if not m.name.startswith(("pyebpf.demo", "pyebpf.__main__")):
            importlib.import_module(m.name)
    found: set[type] = set()
    todo = [Owner]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.startswith("pyebpf."):
                found.add(sub)
                todo.append(sub)
    return found


def test_every_owner_is_tested():
    """Every class of pyebpf that owns kernel objects has a factory above (or is
    a base whose subclasses do): a new owner gets its lifetime tested."""
    untested = {c.__qualname__ for c in _owner_classes()
                if c.__qualname__ not in OWNERS and c.__qualname__ not in COVERED
                and not (c.__qualname__.startswith("_") and c.__subclasses__())}
    assert not untested, f"add a factory to OWNERS for {sorted(untested)}"


def test_a_failing_constructor_leaves_nothing():
    """An owner whose constructor fails half-way releases what it had acquired."""
    from pyebpf.errors import PyebpfError
    from pyebpf.events import RingBufferReader
    from pyebpf.maps import PerCpuArrayMap
    with PerCpuArrayMap("u64", 2) as drops:
        gc.collect()
        fds = _fds()
        with pytest.raises(PyebpfError, match="drop_slot"):
            # refused after the reader created its ring buffer and mapped nothing yet
            RingBufferReader(size=4096, drops=drops, drop_slot=5)
        assert _fds() == fds                   # at once, not after a collection


def test_release_failures_stay_quiet(capfd):
    """A release that fails under garbage collection prints nothing."""
    class Failing(Owner):
        def __init__(self) -> None:
            self._own(_boom)

    Failing()
    gc.collect()
    assert capfd.readouterr().err == ""
    f = Failing()
    with pytest.raises(RuntimeError):          # an explicit close reports it
        f.close()
    assert f.closed


def _boom() -> None:
    raise RuntimeError("release failed")


def test_closing_inside_teardown_is_one_close():
    """close() from inside the owner's own teardown does not run it twice."""
    runs = []

    class Reentrant(Owner):
        def __init__(self) -> None:
            self._own(runs.append, "released")

        def _close_resources(self) -> None:
            runs.append("teardown")
            self.close()

    r = Reentrant()
    r.close()
    r.close()
    assert runs == ["teardown", "released"]


def test_an_owner_can_be_opened_again():
    """``_own`` after close makes a reusable owner (a rebuilt trace) open again."""
    runs: list[int] = []

    class Reusable(Owner):
        def open(self, n: int) -> None:
            self._own(runs.append, n)

    r = Reusable()
    assert r.closed and "closed" in repr(r)
    r.open(1)
    r.close()
    r.open(2)
    assert not r.closed
    r.close()
    assert runs == [1, 2]
