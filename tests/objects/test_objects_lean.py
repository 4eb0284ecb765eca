"""Opening and loading an object stays lean (issue 16: a cold open + load
within 2x of ``bpftool prog loadall``).

A process that imports :mod:`pyebpf.objects` and loads an object imports
none of the modules its path does not need -- each costs a cold process
a fraction of a millisecond to several milliseconds, and every module more
is paid again at interpreter exit:

* ``pyebpf.program`` (the DSL), ``pyebpf.program.check``, ``pyebpf.isa``:
  an object's programs come compiled and encoded; a loaded program's
  ``insns`` are decoded on first use;
* ``pyebpf.text``, ``pyebpf.lang``, ``pyebpf.trace``, ``pyebpf.cli``: other
  front ends;
* ``pyebpf.btf.own`` and ``pyebpf.btf.writer``: an object carries its BTF,
  its maps take their types from it (pyebpf builds BTF only for its own
  maps and programs);
* ``pyebpf.maps`` and ``pyebpf.codecs``: loading needs the maps' fds only;
  ``obj.maps`` makes their Python objects on first use;
* ``pyebpf.kernel.objinfo``: a map the object creates is wrapped with the
  shape it was created with (no ``BPF_OBJ_GET_INFO_BY_FD`` per map);
* ``pyebpf.kernel.hints``: the tables that explain a failure;
* ``resource``: RLIMIT_MEMLOCK is raised only when a kernel without memcg
  accounting says EPERM;
* the standard library's heavy modules (``typing``, ``re``, ``enum``,
  ``argparse``, ``dataclasses``, ``inspect``, ``functools``, ``warnings``,
  ``importlib``, ``ctypes``, ...), none of which the path uses;
* ``collections`` (with the ``operator``, ``reprlib``, ``keyword`` it
  imports: ~1.5 ms cold): no record (named tuple) class is made on the path
  -- ``.BTF.ext``'s and CO-RE's records are plain value classes, the test
  run's result lives in :mod:`pyebpf.kernel.testrun` --, and the BTF index is
  packed memoryviews, not ``array`` (which imports ``collections.abc``);
* ``bisect`` and ``fcntl`` (shared libraries to load): a few dozen search
  steps; an fd 0 or a dup only;
* ``operator``: the BTF types' equality key (``@dataclass``) is made on
  their first comparison, and loading compares none;
* ``pyebpf.loader`` and the ``pyebpf.kernel.syscall`` facade: a program's
  :class:`~pyebpf.loader.LoadedProgram` is made on first use of
  ``loaded`` (until then the object owns the program's fd), and maps are
  created through :mod:`pyebpf.kernel.mapops` itself;
* ``weakref`` (with ``_weakrefset`` and ``types``: ~0.7 ms cold): an owner's
  finalizer is :mod:`pyebpf.kernel.lifetime`'s own, on the built-in weak
  reference.

What the shortcuts give is what the kernel says: the maps' shapes equal
``map_info``'s, the programs' instructions their bytes.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.isa import decode, encode
from pyebpf.kernel import syscall as _sys
from pyebpf.kernel.version import _numbers
from pyebpf.maps import Map
from pyebpf.objects import open_object

from .conftest import unpin_by_name

# (each test that needs the kernel is marked `kernel`; the others run under every Python)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: what opening and loading an object must not import (see the module docstring)
FORBIDDEN = frozenset({
    "pyebpf.program", "pyebpf.program.check", "pyebpf.program.dsl", "pyebpf.isa",
    "pyebpf.text", "pyebpf.lang", "pyebpf.trace", "pyebpf.cli",
    "pyebpf.maps", "pyebpf.codecs",
    "pyebpf.btf.own", "pyebpf.btf.writer", "pyebpf.kernel.objinfo", "pyebpf.kernel.hints",
    "resource", "typing", "re", "enum", "argparse", "dataclasses", "inspect", "functools",
    "warnings", "importlib", "ctypes", "glob", "difflib", "subprocess", "shutil", "tempfile",
    "json", "threading", "logging", "contextlib", "textwrap",
    "collections", "array", "bisect", "fcntl", "operator", "pyebpf.kernel.testrun",
    "pyebpf.loader", "pyebpf.kernel.syscall", "weakref"})

_LOAD = """
import sys
from pyebpf.objects import load_object
obj = load_object(sys.argv[1])
bad = [(p.name, p.status, p.reason) for p in obj.programs.values() if p.status != "loaded"]
assert not bad, bad
print(len(obj.programs), len(obj.map_defs), flush=True)
{after}
obj.close()
"""


@pytest.fixture(autouse=True)
def _no_pins():
    unpin_by_name()
    yield
    unpin_by_name()


def _imported(code: str, *argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime -c CODE ARGV`` with this tree's pyebpf: the
    process and the modules it imported beyond a bare interpreter's."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    pattern = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", re.M)

    def run(src: str, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", src, *args],
                              capture_output=True, text=True, timeout=120, env=env)
        return proc, set(pattern.findall(proc.stderr))

    _, bare = run("pass")
    proc, names = run(code, *argv)
    return proc, names - bare


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["execsnoop", "uprobe", "multi", "kinds1"])
def test_open_and_load_import_no_module_the_path_does_not_need(objects, name):
    proc, names = _imported(_LOAD.format(after=""), objects[name])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # (the check sees the load: the object's modules, the kernel's)
    assert {"pyebpf.objects.loading", "pyebpf.kernel.prog", "pyebpf.kernel.mapops"} <= names
    assert not names & FORBIDDEN, sorted(names & FORBIDDEN)


@pytest.mark.kernel
def test_a_load_compiles_no_code(objects):
    """No ``@dataclass`` ``__init__`` is generated (compiled) on the path:
    the BTF types' is written out (compiling it cost ~0.3 ms)."""
    code = ("import sys\n"
            "from pyebpf import _record\n"
            "made = []\n"
            "compile_init = _record._compile_init\n"
            "_record._compile_init = lambda cls: made.append(cls) or compile_init(cls)\n"
            + _LOAD.format(after="assert not made, made\nprint('compiled', len(made))"))
    proc, _ = _imported(code, objects["execsnoop"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiled 0" in proc.stdout


@pytest.mark.kernel
def test_the_maps_python_objects_are_made_on_first_use(objects):
    after = ("assert 'pyebpf.maps' not in sys.modules\n"
             "p = next(iter(obj.programs.values()))\n"
             "print(sorted((n, type(m).__name__) for n, m in p.loaded.maps.items()))\n"
             "assert obj.maps['.rodata'].frozen and obj.maps['events'].fileno() > 0\n"
             "assert p.loaded.maps['events'] is obj.maps['events']\n")
    proc, _ = _imported(_LOAD.format(after=after), objects["execsnoop"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("[('.bss', 'ArrayMap'), ('.data', 'ArrayMap'), ('.rodata', 'ArrayMap'), "
            "('events', 'RingBuf')]") in proc.stdout


@pytest.mark.kernel
def test_a_programs_loaded_wrapper_is_made_on_first_use(objects):
    after = ("assert 'pyebpf.loader' not in sys.modules\n"
             "p = obj.programs['handle_execve']\n"
             "fd = p.fileno()\n"
             "assert 'pyebpf.loader' not in sys.modules\n"
             "lp = p.loaded\n"
             "assert type(lp).__name__ == 'LoadedProgram' and p.loaded is lp\n"
             "assert lp.fileno() == fd and lp.name == 'handle_execve' and not lp.closed\n"
             "assert lp.prog_type == p.prog_type\n"
             "assert sum(i.slots for i in lp.insns) == p.insn_count\n"
             "obj.close()\n"
             "assert lp.closed\n"
             "print('wrapped', lp)")
    proc, _ = _imported(_LOAD.format(after=after), objects["execsnoop"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wrapped <LoadedProgram 'handle_execve'" in proc.stdout and "(closed)>" in proc.stdout


@pytest.mark.kernel
def test_a_program_first_asked_for_after_close_is_closed(objects):
    obj = open_object(objects["execsnoop"]).load()
    prog = next(iter(obj.programs.values()))
    fd = prog.fileno()
    obj.close()
    assert prog.loaded.closed and prog.status == "loaded"
    assert not os.path.exists(f"/proc/self/fd/{fd}") or \
        not os.readlink(f"/proc/self/fd/{fd}").startswith("anon_inode:bpf-prog")


def test_a_large_object_is_mapped_and_its_dwarf_read_when_asked(objects, tmp_path):
    """A ``-g`` object built with a vmlinux.h is mostly DWARF: it is mapped
    while parsed, the loader's sections copied out, and the file's bytes and
    the debug sections read again only when asked for (as they are in it);
    a file changed since is refused, not misread."""
    from pyebpf.objects.elfobj import ObjElf
    from pyebpf.objects.errors import ObjectError

    path = tmp_path / "copy.o"
    raw = open(objects["execsnoop"], "rb").read()
    path.write_bytes(raw)
    assert len(raw) >= 64 * 1024
    elf = ObjElf.read(str(path))
    assert elf._data is None                            # not read whole
    debug = [sec for sec in elf.sections if sec.name.startswith(".debug_info")]
    assert debug and all(sec._data is None for sec in debug)
    for sec in elf.sections:
        if not sec.name.startswith((".debug", ".rel.debug")) and sec.type != 8:
            assert sec._data is not None, sec.name         # copied while mapped
    assert ObjElf(raw, str(path)).section(".BTF").data == elf.section(".BTF").data
    assert debug[0].data == raw[debug[0]._offset:debug[0]._offset + debug[0].size]
    assert elf.data == raw
    again = ObjElf.read(str(path))
    path.write_bytes(raw + b"\0")                       # rebuilt since
    with pytest.raises(ObjectError, match="changed since it was opened"):
        again.data                                         # noqa: B018
    with pytest.raises(ObjectError, match="changed since it was opened"):
        next(sec for sec in again.sections if sec.name.startswith(".debug")).data  # noqa: B018


@pytest.mark.kernel
def test_closing_closes_maps_never_used(objects):
    obj = open_object(objects["execsnoop"]).load()
    fds = [m.fileno() for m in obj._maps.values()]
    obj.close()
    assert all(m.closed for m in obj.maps.values())
    for fd in fds:              # (closed, or reused by something else since)
        assert not os.path.exists(f"/proc/self/fd/{fd}") or \
            not os.readlink(f"/proc/self/fd/{fd}").startswith("anon_inode:bpf-map")


@pytest.mark.kernel
def test_a_loaded_programs_instructions_are_decoded_on_first_use(objects):
    after = ("assert 'pyebpf.isa' not in sys.modules\n"
             "p = next(iter(obj.programs.values()))\n"
             "n = sum(i.slots for i in p.loaded.insns)\n"
             "assert 'pyebpf.isa' in sys.modules and n == p.insn_count, (n, p.insn_count)\n"
             "print('decoded', n)")
    proc, _ = _imported(_LOAD.format(after=after), objects["execsnoop"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "decoded " in proc.stdout


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["execsnoop", "multi", "uprobe", "kinds1", "kinds2"])
def test_loaded_instructions_are_the_programs_bytes(objects, name):
    with open_object(objects[name]) as obj:
        obj.load()
        for prog in obj.programs.values():
            insns = prog.loaded.insns
            assert insns is prog.loaded.insns              # decoded once
            raw = encode(insns)
            assert len(raw) == 8 * prog.insn_count
            assert decode(raw) == insns


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["execsnoop", "multi", "uprobe", "kinds1", "kinds2"])
def test_created_maps_have_the_shape_the_kernel_reports(objects, name):
    with open_object(objects[name]) as obj:
        obj.load()
        wrapped = 0
        for mname, m in obj.maps.items():
            if not isinstance(m, Map):                      # a RawObjectMap: its name
                assert m.name == m.info().name == _sys.map_info(m.fileno()).name, mname
                continue
            info = _sys.map_info(m.fileno())
            assert type(m).map_type == info.type, mname
            assert (m.name, m.key_size, m.value_size, m.max_entries, m.flags) == \
                (info.name, info.key_size, info.value_size, info.max_entries, info.flags), mname
            wrapped += 1
        assert wrapped


@pytest.mark.kernel
def test_a_write_only_map_does_not_keep_the_fds_access_flag(objects):
    """BPF_F_RDONLY/WRONLY are the fd's, not the map's: the kernel does not
    report them, nor does the wrapped map."""
    with open_object(objects["multi"]) as obj:
        obj.map_defs[".bss"].flags |= 1 << 4                # BPF_F_WRONLY
        obj.load()
        m = obj.maps[".bss"]
        assert m.flags == _sys.map_info(m.fileno()).flags
        assert not m.flags & (1 << 4)


@pytest.mark.kernel
def test_memlock_is_raised_on_the_first_eperm_only(objects):
    """A kernel with memcg accounting never needs RLIMIT_MEMLOCK: the load
    leaves it alone; the first EPERM (here: fentry, which this kernel
    refuses) raises it and tries again, and the refusal stands."""
    code = ("import sys\n"
            "from pyebpf.kernel import core\n"
            "from pyebpf.objects import open_object\n"
            "with open_object(sys.argv[1]) as obj:\n"
            "    obj.load()\n"
            "    assert not core._memlock_done and 'resource' not in sys.modules\n"
            "with open_object(sys.argv[2]) as obj:\n"
            "    obj.load(strict=False)\n"
            "    (p,) = obj.programs.values()\n"
            "    print(p.status, p.reason)\n"
            "    assert core._memlock_done and 'resource' in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code, objects["uprobe"], objects["kinds3"]],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("skipped ") and "EPERM" in proc.stdout


@fuzz_settings(300)
@given(st.text(alphabet="0123456789.-+_abcrc~", max_size=30))
def test_the_kernel_version_numbers_are_the_digit_runs(text):
    """``kernel.version`` reads ``uname -r`` without ``re``: the same
    numbers ``re.findall(r"\\d+")`` finds."""
    assert _numbers(text) == [int(x) for x in re.findall(r"\d+", text)]
