"""The kernel boundary (issue 13, section 1): pure numbers, one home per fact,
no kernel calls above the kernel layer, the errno policy as well-formed data."""
from __future__ import annotations

import ast
import errno
import pathlib
import subprocess
import sys

import pytest

from pyebpf.errors import (AttachError, KernelError, MapFullError, NotSupportedError,
                           PermissionDeniedError, ResourceLimitError)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "pyebpf"


# ------------------------------------------------------------ pure constants
def test_constants_import_without_cffi():
    """``cffi`` absent (importing it fails): the UAPI numbers, the kernel
    package and the DSL's output idioms still import, and load no ffi."""
    code = (
        "import sys\n"
        "sys.modules['cffi'] = None\n"          # 'import cffi' now raises ImportError
        "sys.modules['_cffi_backend'] = None\n"
        "import pyebpf.kernel.constants as c\n"
        "from pyebpf.kernel import MapType, ProgType\n"
        "import pyebpf.kernel\n"
        "import pyebpf.program\n"
        "assert c.MapType.RINGBUF == 27 and MapType.HASH == 1 and ProgType.XDP == 6\n"
        "assert c.PERF_RECORD_SAMPLE == 9 and c.BPF_RINGBUF_HDR_SZ == 8\n"
        "bad = [m for m in sys.modules if m.startswith(('pyebpf.kernel.ffi', "
        "'pyebpf.kernel._ffi_abi', 'pyebpf.kernel.syscall', 'pyebpf.kernel.core'))]\n"
        "assert not bad, bad\n"
        "try:\n"
        "    pyebpf.kernel.Fd\n"
        "except ImportError:\n"
        "    print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_uapi_numbers_have_one_home():
    from pyebpf import events
    from pyebpf.kernel import constants as c, perf
    from pyebpf.kernel.ffi import ffi
    from pyebpf.program import output
    for name in ("PERF_RECORD_SAMPLE", "PERF_RECORD_LOST", "BPF_RINGBUF_BUSY_BIT",
                 "BPF_RINGBUF_DISCARD_BIT", "BPF_RB_NO_WAKEUP", "BPF_RB_FORCE_WAKEUP"):
        assert getattr(events, name) is getattr(c, name), name      # re-exported, not copied
    # the one deliberate copy (the DSL loads no kernel tables) agrees
    assert output.BPF_F_CURRENT_CPU == c.BPF_F_CURRENT_CPU
    for field in ("data_head", "data_tail", "data_offset", "data_size"):
        off = ffi.offsetof("struct perf_event_mmap_page", field)
        assert getattr(perf, "MMAP_" + field.upper()) == off
    assert (events._DATA_HEAD, events._DATA_TAIL) == (perf.MMAP_DATA_HEAD, perf.MMAP_DATA_TAIL)


# ------------------------------------------------------- the kernel boundary
def _above_kernel() -> list[pathlib.Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if "kernel" not in p.relative_to(PKG).parts]


def _imports_of(path: pathlib.Path) -> list[tuple[str, tuple[str, ...], int]]:
    """(absolute module, names, line) of every import in ``path``."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = rel[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append((mod, tuple(a.name for a in node.names), node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, (), node.lineno) for a in node.names]
    return out


#: modules still calling the kernel directly, with what to use instead (empty this)
PENDING: set[str] = set()   # files still calling the kernel directly (none)


def test_nothing_above_the_kernel_layer_calls_the_kernel():
    """No module outside pyebpf/kernel imports the cffi declaration (``ffi``,
    ``lib``, ``sys_bpf``): they go through the kernel layer's functions."""
    bad = []
    for path in _above_kernel():
        if str(path.relative_to(ROOT)) in PENDING:
            continue
        for mod, names, line in _imports_of(path):
            if mod in ("pyebpf.kernel.ffi", "pyebpf.kernel._ffi_abi") or \
                    (mod == "pyebpf.kernel" and {"ffi", "_ffi_abi"} & set(names)):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} {names}")
    assert not bad, "\n".join(bad)


def test_syscall_module_lends_every_name_it_had():
    from pyebpf.kernel import syscall
    old = ["ENOTSUPP", "Fd", "bpf", "try_bpf", "error_for", "new_attr", "attr_size",
           "map_create", "map_lookup", "map_update", "map_delete", "map_get_next_key",
           "map_lookup_and_delete", "map_freeze", "map_lookup_batch", "map_update_batch",
           "map_delete_batch", "MapOps", "BatchOps",
           "obj_pin", "obj_get", "bpffs_mounted", "mount_bpffs", "ensure_bpffs",
           "prog_load", "verifier_message", "prog_test_run", "TestRun",
           "ProgInfo", "MapInfo", "LinkInfo", "UprobeMultiLinkInfo", "JitedImage",
           "obj_get_info_by_fd", "prog_info", "map_info", "link_info",
           "prog_xlated_insns", "prog_jited", "prog_jited_insns",
           "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id",
           "prog_get_next_id", "map_get_next_id", "link_get_next_id",
           "enable_stats", "link_create", "perf_event_link", "uprobe_multi_link",
           "raw_tracepoint_open", "link_detach", "task_fd_query", "TaskFdQuery",
           "perf_event_open", "perf_event_enable", "perf_event_disable",
           "perf_event_reset", "perf_event_set_bpf", "perf_event_set_output",
           "perf_event_pause_output", "perf_event_id", "DEFAULT_LOG_SIZE", "BPF_FS_MAGIC"]
    for name in old:
        value = getattr(syscall, name)
        home = sys.modules[f"pyebpf.kernel.{syscall._HOME[name]}"]
        assert value is getattr(home, name), name
    assert set(old) - {"DEFAULT_LOG_SIZE", "BPF_FS_MAGIC"} <= set(syscall.__all__)
    ns: dict[str, object] = {}
    exec("from pyebpf.kernel.syscall import *", ns)
    assert ns["map_create"] is syscall.map_create
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        syscall.nope  # noqa: B018


def test_new_modules_stay_small():
    for name in ("core", "hints", "mapops", "prog", "objinfo", "links", "fs", "perf",
                 "syscall"):
        lines = (PKG / "kernel" / f"{name}.py").read_text().count("\n")
        assert lines < 800, (name, lines)


# ------------------------------------------------------- errno policy (data)
def test_every_rule_fills_and_gives_its_class():
    from pyebpf.kernel import hints
    context = dict(fd=7, path="/sys/fs/bpf/x", pid=42, tname="HASH", prog_type=1,
                   attach="#0", license_note="", size=4096, out=64, what="map", id=3,
                   type=0, name="sys_enter", fstype="bpf", source="bpf")
    for op, table in hints.RULES.items():
        for err, (cls, detail_t, hint_t) in table.items():
            exc = hints.kernel_error(op, err, "what", **context)
            want = cls or (hints.OTHERWISE.get(op) or hints.DEFAULT.get(err) or (KernelError,))[0]
            assert type(exc) is want, (op, err)
            assert exc.errno == err and exc.operation == op
            assert "{" not in exc.hint and "{" not in exc.detail, (op, err)
            assert bool(exc.hint) == bool(hint_t), (op, err)   # every template filled
            if detail_t is None:
                assert exc.detail == "what"


def test_rules_read_like_the_old_branches():
    from pyebpf.kernel.constants import Cmd
    from pyebpf.kernel.hints import ENOTSUPP, kernel_error
    e = kernel_error("BPF_MAP_UPDATE_ELEM", errno.E2BIG, "map fd 5", fd=5)
    assert isinstance(e, MapFullError) and "map fd 5 is full" in e.detail
    e = kernel_error("BPF_MAP_UPDATE_ELEM", errno.EPERM, "map fd 5", fd=5)
    assert isinstance(e, PermissionDeniedError) and "frozen" in e.hint and "otherwise: " in e.hint
    e = kernel_error("BPF_MAP_LOOKUP_ELEM", ENOTSUPP, "map fd 5", fd=5)
    assert isinstance(e, NotSupportedError)
    # a link fails as an AttachError whatever the errno, except permissions
    assert type(kernel_error("BPF_LINK_CREATE", errno.ENOMEM, "x")) is AttachError
    assert type(kernel_error("BPF_LINK_CREATE", errno.EPERM, "x")) is PermissionDeniedError
    # a hint that needs what the caller did not give (or gave as None) is left out
    assert kernel_error("BPF_LINK_CREATE", errno.ENOENT, "x", path=None).hint == ""
    assert kernel_error("BPF_LINK_CREATE", errno.ENOENT, "x", path="/bin/ls").hint == \
        "/bin/ls does not exist"
    # no rule for the op: the errno's default, as error_for gives it
    e = kernel_error("BPF_BTF_LOAD", errno.ENOMEM, "x")
    assert type(e) is ResourceLimitError and "ulimit -l" in e.hint
    e = kernel_error(Cmd.MAP_GET_FD_BY_ID, errno.ENOENT, what="map", id=9)
    assert e.operation == "BPF_MAP_GET_FD_BY_ID" and e.hint == "no map with id 9 (it was freed?)"
    e = kernel_error("mount", errno.ENODEV, "mounting tracefs at /t", fstype="tracefs",
                     source="nodev", path="/t")
    assert isinstance(e, NotSupportedError) and e.hint == "as root run: mount -t tracefs nodev /t"


def test_verifier_hints_are_a_table():
    from pyebpf.kernel.hints import VERIFIER_HINTS, verifier_hint, verifier_message
    assert all(isinstance(n, str) and isinstance(h, str) and h for n, h in VERIFIER_HINTS)
    log = "0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000)\n"
    assert verifier_message(log) == "R0 !read_ok"
    assert verifier_hint("R0 !read_ok").startswith("r0 is the program's return value")
    assert verifier_hint("nothing we know") == ""
    # a dereference of the 0 a NULL test left in a maybe-NULL pointer is no plain number
    walked = ("5: (85) call bpf_map_lookup_elem#1 ; R0=map_value_or_null(id=1,ks=4,vs=8)\n"
              "6: (55) if r0 != 0x0 goto pc+1 ; R0=0\n7: (79) r0 = *(u64 *)(r0 +0)\n")
    assert verifier_hint("R0 invalid mem access 'scalar'", walked).startswith("r0 is NULL here")
    assert verifier_hint("R0 invalid mem access 'scalar'").startswith("a plain number")
    assert verifier_hint("R1 invalid mem access 'scalar'", walked).startswith("a plain number")
    short = "invalid access to packet, off=20 size=2, R2(id=0,off=20,r=14)\n"
    assert "needs 22 (off=20 + size=2)" in verifier_hint("R2 offset is outside of the packet",
                                                          short)
    unchecked = short.replace("r=14", "r=0")
    assert verifier_hint("R2 offset is outside of the packet", unchecked).startswith(
        "prove the access is inside the packet first")


def test_start_up_loads_only_the_kernel_modules_it_uses():
    """The policy tables load with the first failure and the info records when
    first asked for: an ordinary start (maps, attach, loader) imports neither."""
    code = ("import sys, pyebpf.maps, pyebpf.attach, pyebpf.loader, pyebpf.events\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('pyebpf.kernel.'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    assert "pyebpf.kernel.mapops" in loaded
    assert not loaded & {"pyebpf.kernel.hints", "pyebpf.kernel.objinfo", "pyebpf.kernel.links",
                         "pyebpf.kernel.fs"}, loaded


def test_set_death_signal():
    """prctl(PR_SET_PDEATHSIG) through the kernel layer: read back with
    PR_GET_PDEATHSIG; a bad signal number is a KernelError (EINVAL)."""
    code = (
        "import errno, signal\n"
        "from pyebpf.errors import KernelError\n"
        "from pyebpf.kernel.ffi import NR_PRCTL, ffi, lib\n"
        "from pyebpf.kernel.process import set_death_signal\n"
        "set_death_signal(signal.SIGUSR1)\n"
        "out = ffi.new('int *')\n"
        "assert lib.syscall(NR_PRCTL, ffi.cast('long', 2), out) == 0\n"   # PR_GET_PDEATHSIG
        "assert out[0] == signal.SIGUSR1, out[0]\n"
        "try:\n"
        "    set_death_signal(9999)\n"
        "except KernelError as exc:\n"
        "    assert exc.errno == errno.EINVAL and exc.operation == 'prctl', exc\n"
        "    print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
