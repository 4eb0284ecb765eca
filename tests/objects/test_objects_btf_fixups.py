"""The object's BTF kept where the kernel would refuse it as clang wrote it
(issue 28, items 2 and 3): kfunc prototypes with unnamed parameters ("Invalid
arg#1"), ``.ksyms`` kfunc entries ("Not a VAR kind member"), a size-0 DATASEC
of an empty section ("size == 0"); and a ``__weak`` kfunc the kernel lacks
resolving to 0, as libbpf resolves it.  Before, the BTF was dropped (and a
``bpf_loop`` callback refused: "missing btf func_info"), and the weak kfunc
refused the program.  libbpf's verdict (bpftool prog loadall) stands beside."""
from __future__ import annotations

import os
import warnings

import pytest

from pyebpf.btf import Btf, BtfBuilder, Kind
from pyebpf.kernel.btf import btf_load
from pyebpf.objects import open_object
from pyebpf.objects.btfprep import KernelBtf, kernel_btf, prepare_btf
from pyebpf.objects.loading import _hidden_subprograms

from .conftest import HERE, compile_bpf, libbpf_loads

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def empty_data(objects, tmp_path_factory) -> str:
    """iternum.bpf.c with a zero-length array in its own section (-DEMPTY_DATA)."""
    out = tmp_path_factory.mktemp("iternum")
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"), out / "vmlinux.h")
    return compile_bpf(HERE / "c" / "iternum.bpf.c", out, "iternum_empty.o", "-DEMPTY_DATA")


def _load_and_run(path: str) -> dict[str, int]:
    """Load every program with the object's BTF (no warning), run each once; the globals."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_object(path) as obj:
            obj.load()
            assert obj.btf_error is None
            for p in obj.programs.values():
                assert p.loaded.info().btf_id > 0, p.name   # loaded with its BTF
                assert p.test_run(ctx=b"").retval == 0
            return {name: obj.globals[name] for name in obj.globals if name != "scratch"}


def test_kfunc_prototypes_and_callbacks_keep_the_btf(objects):
    ok, err = libbpf_loads(objects["iternum"])
    assert ok, err
    btf = open_object(objects["iternum"]).btf
    # what the kernel would refuse: a kfunc parameter without a name
    (fid,) = btf.find("bpf_iter_num_new", Kind.FUNC)
    assert not any(p.name for p in btf[btf[fid].ref].params)
    values = _load_and_run(objects["iternum"])
    assert values["loop_sum"] == 10 and values["iter_sum"] == 10   # bpf_loop's callback ran


def test_a_weak_kfunc_the_kernel_lacks_is_0(objects):
    with open_object(objects["iternum"]) as obj:
        assert obj.externs["bpf_pyebpf_no_such_kfunc"] == "kfunc"
        obj.load()
        obj.programs["optional_kfunc"].test_run(ctx=b"")
        assert obj.globals["has_optional"] == 0            # bpf_ksym_exists() was false


def test_a_size_0_datasec_is_sized(empty_data):
    ok, err = libbpf_loads(empty_data)
    # libbpf 1.1 refuses the object at open ("Error finalizing .BTF"); pyebpf loads it
    assert not ok and "finalizing .BTF" in err
    btf = open_object(empty_data).btf
    (sid,) = btf.find(".data.scratch", Kind.DATASEC)
    assert btf[sid].size == 0
    assert _load_and_run(empty_data)["iter_sum"] == 10


TAGGED = """\
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#define __user __attribute__((btf_type_tag("user")))
#define __cfg __attribute__((btf_decl_tag("cfg")))
struct settings { int level __cfg; float scale; char __user *buf; };
struct settings settings = { .level = 1, .scale = 2.0f };
SEC("syscall") int read_settings(void *ctx) { return settings.level; }
char LICENSE[] SEC("license") = "GPL";
"""


def test_kinds_the_kernel_lacks_are_rewritten_and_still_loaded(objects, tmp_path):
    # pretend the kernel predates every optional kind this object has
    (tmp_path / "tagged.bpf.c").write_text(TAGGED)
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"),
               tmp_path / "vmlinux.h")
    with open_object(compile_bpf(tmp_path / "tagged.bpf.c", tmp_path, "tagged.o")) as obj:
        btf = obj.btf
        assert btf is not None
        args = (btf, obj._section_size, obj._symbol_offset, {}, 0, _hidden_subprograms(obj))
        lacks = KernelBtf(float=False, decl_tag=False, type_tag=False, func_global=False)
        out = Btf(prepare_btf(*args, kernel=lacks).blob)
        kinds = {btf.kind(i) for i in btf.ids()}
        assert {Kind.TYPE_TAG, Kind.DECL_TAG, Kind.FLOAT} <= kinds
        assert not {out.kind(i) for i in out.ids()} & {Kind.TYPE_TAG, Kind.DECL_TAG,
                                                       Kind.FLOAT}
        assert all(out[i].linkage == 0 for i in out.ids() if out.kind(i) == Kind.FUNC)
        btf_load(prepare_btf(*args, kernel=lacks).blob).close()
        # this kernel lacks nothing: the probes say so, only for the kinds present
        probed = kernel_btf(btf)
        assert repr(probed) == "KernelBtf(lacks: nothing)"


def test_a_size_0_datasec_of_a_section_the_file_lacks_is_sized_too():
    b = BtfBuilder()
    i32 = b.add_int("int", 4, signed=True)
    var = b.add_var("gone", i32, linkage=1)
    b.add_datasec(".data.gone", 0, [(var, 0, 4)])
    btf = Btf(b.build())
    out = Btf(prepare_btf(btf, lambda name: None, lambda sec, name: None, {}, 0).blob)
    sec = out[out.find(".data.gone")[0]]
    assert sec.size == 4 and [(v.offset, v.size) for v in sec.secinfo] == [(0, 4)]
    btf_load(prepare_btf(btf, lambda name: None, lambda sec, name: None, {}, 0).blob).close()
