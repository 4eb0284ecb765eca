"""Prog arrays filled in C (``.values = { [0] = &tail_a }``, as Cilium-style
tail-call dispatch is written): the slots are recorded when the object is
opened and filled with the programs once they are loaded, as libbpf does;
the slot of a program that did not load stays empty and says why, and the
rest of the object loads (issue 28, item 1: the whole object was refused,
"slot 0 names 'tail_a', which is not a map of this object")."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

from pyebpf.errors import VerifierError
from pyebpf.kernel import syscall as _sys
from pyebpf.objects import ObjectError, open_object

from .conftest import HERE, compile_bpf, libbpf_loads

pytestmark = pytest.mark.kernel
PACKET = bytes(64)


def _slot(obj, index: int) -> int | None:
    """The id of the program in slot ``index`` of dispatch_calls (None: empty)."""
    value = _sys.map_lookup(obj.maps["dispatch_calls"].fileno(), struct.pack("<I", index), 4)
    return None if value is None else struct.unpack("<I", value)[0]


def _run(obj, mark: int) -> int:
    """dispatch's return value for a packet of that mark (99: the slot was empty)."""
    ctx = bytearray(192)                       # struct __sk_buff, mark at offset 8
    struct.pack_into("<I", ctx, 8, mark)
    return obj.programs["dispatch"].test_run(PACKET, ctx=bytes(ctx)).retval


@pytest.fixture(scope="module")
def rejecting(objects, tmp_path_factory) -> str:
    """tailcalls.bpf.c with tail_c made unverifiable (-DREJECT_C)."""
    out = tmp_path_factory.mktemp("tailcalls")
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"), out / "vmlinux.h")
    return compile_bpf(HERE / "c" / "tailcalls.bpf.c", out, "tailcalls_reject.o",
                       "-DREJECT_C")


def test_slots_are_filled_with_the_loaded_programs_as_libbpf_fills_them(objects):
    ok, err = libbpf_loads(objects["tailcalls"])
    assert ok, err
    with open_object(objects["tailcalls"]) as obj:
        assert obj.map_defs["dispatch_calls"].init_slots == {0: "tail_a", 2: "tail_b",
                                                             3: "tail_c"}
        obj.load()
        ids = {n: p.loaded.info().id for n, p in obj.programs.items()}
        assert [_slot(obj, i) for i in range(4)] == [ids["tail_a"], None, ids["tail_b"],
                                                     ids["tail_c"]]
        assert obj.empty_slots == []
        assert [_run(obj, m) for m in range(5)] == [10, 99, 20, 30, 99]


def test_a_rejected_program_leaves_its_slot_empty_and_the_rest_load(rejecting):
    ok, _ = libbpf_loads(rejecting)
    assert not ok                               # libbpf refuses the whole object
    with open_object(rejecting) as obj:
        obj.load(strict=False)
        status = {n: p.status for n, p in obj.programs.items()}
        assert status == {"tail_a": "loaded", "tail_b": "loaded", "tail_c": "rejected",
                          "dispatch": "loaded"}
        assert _slot(obj, 3) is None and _slot(obj, 0) is not None
        (said,) = obj.empty_slots
        assert said.startswith("map 'dispatch_calls': slot [3]: prog 'tail_c' is rejected: "
                               "tailcalls.bpf.c:"), said
        assert said.endswith("; the slot is left empty")
        assert [_run(obj, m) for m in range(4)] == [10, 99, 20, 99]


def test_a_strict_load_raises_the_rejection(rejecting):
    with pytest.raises(VerifierError, match="invalid variable-offset read from stack"):
        open_object(rejecting).load()


def test_a_slot_naming_no_program_is_said_at_open(tmp_path, objects):
    src = (HERE / "c" / "tailcalls.bpf.c").read_text().replace(
        "[3] = (void *)&tail_c,", "[3] = (void *)&helper,").replace(
        "int tail_c(struct __sk_buff *skb);",
        "int tail_c(struct __sk_buff *skb);\n__noinline int helper(struct __sk_buff *s) "
        "{ return s->len; }")
    (tmp_path / "bad.bpf.c").write_text(src)
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"),
               tmp_path / "vmlinux.h")
    path = compile_bpf(tmp_path / "bad.bpf.c", tmp_path, "bad.o")
    with pytest.raises(ObjectError, match=r"map 'dispatch_calls': slot \[3\]: 'helper' is "
                                          r"not a program of this object \(progs: tail_a, "):
        open_object(path)


def test_the_listing_shows_the_slots(objects):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "pyebpf", "object", objects["tailcalls"]],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "dispatch_calls" in ln)
    assert line.rstrip().endswith("prog_array, key 4, value 4, max_entries 4, "
                                  "slots [0] tail_a [2] tail_b [3] tail_c"), line


def test_the_command_line_names_the_empty_slot(rejecting):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "pyebpf", "object", rejecting, "--load"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1, res.stderr
    assert "map 'dispatch_calls': slot [3]: prog 'tail_c' is rejected: " in res.stdout
    assert "3 loaded, 1 rejected, 0 skipped" in res.stdout
