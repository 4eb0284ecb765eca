"""Loading the test objects: pyebpf's verdict on every program equals
libbpf's (``bpftool prog loadall``), what the kernel refuses is skipped, and
a rejection names the C source line."""
from __future__ import annotations

import os

import pytest

import pyebpf
from pyebpf.errors import VerifierError
from pyebpf.objects import ObjectError, ObjectFileError, open_object

from .conftest import KINDS, PINNED, libbpf_loads, unpin_by_name

# (each test that needs the kernel is marked `kernel`; the others run under every Python)

#: what each kinds.bpf.c program is, and what this kernel does with it
KIND_SECTIONS = {1: "tp_btf", 2: "iter", 3: "fentry", 4: "lsm", 5: "kprobe", 6: "xdp",
                 7: "socket", 8: "perf_event"}


@pytest.fixture(autouse=True)
def _no_pins():
    unpin_by_name()
    yield
    unpin_by_name()


@pytest.mark.kernel
@pytest.mark.parametrize("index", range(1, KINDS + 1), ids=lambda i: KIND_SECTIONS[i])
def test_program_kinds_match_libbpf(objects, index):
    ok, err = libbpf_loads(objects[f"kinds{index}"])
    with open_object(objects[f"kinds{index}"]) as obj:
        (prog,) = obj.programs.values()
        assert prog.kind == KIND_SECTIONS[index]
        obj.load(strict=False)
        if ok:
            assert prog.status == "loaded", prog.reason
        else:
            # libbpf fails the load; pyebpf knows the kernel refuses the type
            assert "Operation not permitted" in err
            assert prog.status == "skipped"
            assert "EPERM" in prog.reason and "probe" in prog.reason


@pytest.mark.kernel
@pytest.mark.parametrize("name", ["execsnoop", "multi", "uprobe", "opensnoop", "bootstrap"])
def test_whole_objects_load_as_libbpf_loads_them(objects, name):
    ok, err = libbpf_loads(objects[name])
    assert ok, err
    with pyebpf.load_object(objects[name]) as obj:
        assert obj.programs
        assert all(p.status == "loaded" for p in obj.programs.values())
        for p in obj.programs.values():
            assert p.loaded.info().id > 0


@pytest.mark.kernel
def test_hidden_global_subprogram_is_verified_as_static(objects):
    # libbpf marks a __hidden global subprogram static in the BTF it loads,
    # so the kernel verifies it with its caller's stack pointer, not a
    # maybe-NULL one (libbpf's usdt.bpf.h bpf_usdt_arg() is such a function)
    ok, err = libbpf_loads(objects["hidden"])
    assert ok, err
    with pyebpf.load_object(objects["hidden"]) as obj:
        assert obj.programs["hidden_caller"].status == "loaded"
        (sym,) = [s for s in obj.elf.symbols if s.name == "fill_answer"]
        assert sym.is_hidden_global


@pytest.mark.kernel
def test_rejected_program_names_the_c_line(objects):
    ok, err = libbpf_loads(objects["broken"])
    assert not ok and "bad_read" in err
    with open_object(objects["broken"]) as obj:
        obj.load(strict=False)
        assert obj.programs["good"].status == "loaded"
        bad = obj.programs["bad_read"]
        assert bad.status == "rejected"
        assert isinstance(bad.error, VerifierError)
        assert bad.error.origin == "broken.bpf.c:19"
        assert "return *v;" in str(bad.error)
        assert "map_value_or_null" in bad.error.message
    with pytest.raises(VerifierError, match="broken.bpf.c:19"):
        pyebpf.load_object(objects["broken"])


def test_object_model(objects):
    with open_object(objects["multi"]) as obj:
        assert [(p.name, p.section) for p in obj.programs.values()] == [
            ("first", "tracepoint/syscalls/sys_enter_getppid"),
            ("second", "tracepoint/syscalls/sys_enter_getppid"),
            ("raw_one", "raw_tp/sys_enter")]
        d = obj.map_defs
        assert d["counts"].type_name == "hash" and d["counts"].key_size == 4
        assert d["counts"].value_size == 8 and d["counts"].max_entries == 128
        assert d["outer"].inner is not None and d["outer"].inner.max_entries == 4
        assert d["outer"].init_slots == {}
        assert d[PINNED].pinning == 1
        assert d[".rodata.cfg"].frozen and not d[".data.stats"].frozen
        assert obj.externs == {"_stext": "ksym", "LINUX_KERNEL_VERSION": "kconfig",
                               "CONFIG_HZ": "kconfig"}
        assert obj.globals["scale"] == 3 and obj.globals["extra"] == 5
        needs = obj.needs()["tracepoint/syscalls/sys_enter_getppid"]
        assert needs["bpf-to-bpf calls"] == 3 and needs["externs"] == 3
    with open_object(objects["execsnoop"]) as obj:
        assert obj.needs()[".text"]["CO-RE"] >= 2     # parent_tgid(): real_parent, tgid


@pytest.mark.kernel
def test_loading_pins_by_name_and_reuses_the_pin(objects):
    with pyebpf.load_object(objects["multi"]) as obj:
        assert os.path.exists(f"/sys/fs/bpf/{PINNED}")
        obj.maps[PINNED][7] = 70
        first_id = obj.maps[PINNED].info().id
    with pyebpf.load_object(objects["multi"]) as obj:
        assert obj.maps[PINNED].info().id == first_id
        assert obj.maps[PINNED][7] == 70


def test_bad_input_is_a_clear_error(tmp_path, objects):
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"not an elf at all")
    with pytest.raises(ObjectFileError, match="not an ELF file"):
        open_object(str(junk))
    with pytest.raises(ObjectError, match="cannot read"):
        open_object(str(tmp_path / "missing.o"))
    x86 = tmp_path / "x86.o"
    with open("/proc/self/exe", "rb") as fh:
        x86.write_bytes(fh.read())
    with pytest.raises(ObjectFileError, match="not BPF"):
        open_object(str(x86))
    with open_object(objects["execsnoop"]) as obj:
        with pytest.raises(ObjectError, match="did you mean targ_tgid"):
            obj.globals["targ_tgd"] = 1
        with pytest.raises(ObjectError, match="does not fit"):
            obj.globals["targ_tgid"] = 1 << 40
        with pytest.raises(ObjectError, match="cannot store"):
            obj.globals["targ_tgid"] = 1.5
        with pytest.raises(ObjectError, match="call load"):
            obj.programs["handle_execve"].fileno()


@pytest.mark.kernel
def test_nothing_leaks(objects, no_fd_leak):
    for _ in range(3):
        with pyebpf.load_object(objects["multi"]) as obj:
            assert obj.maps["counts"].fileno() > 0
    obj = open_object(objects["execsnoop"])
    obj.load()
    obj.close()
    obj.close()


def test_kallsyms_is_read_only_as_far_as_the_last_name(monkeypatch):
    # /proc/kallsyms is ~5 MB the kernel writes line by line (reading it all
    # costs tens of ms): the ksym lookup stops at the last name it needs,
    # each name taking its first line
    from pyebpf.objects import loading
    lines = ["ffffffff81000000 T _stext\n", "ffffffff81000010 t twice\n",
             "ffffffff81000020 T twice\n"] + ["ffffffff81000030 t filler\n"] * 10000
    read: list[str] = []

    class Kallsyms:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def __iter__(self):
            for line in lines:
                read.append(line)
                yield line

    monkeypatch.setattr(loading, "open", lambda *a, **k: Kallsyms(), raising=False)
    assert loading._kallsyms({"_stext", "twice"}) == {"_stext": 0xffffffff81000000,
                                                      "twice": 0xffffffff81000010}
    assert len(read) == 2
    assert loading._kallsyms({"absent"}) == {} and len(read) == 2 + len(lines)


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_damaged_proc_config_falls_back_to_boot_config(monkeypatch, damage):
    import gzip
    import io

    from pyebpf.objects import loading
    good = gzip.compress(b"CONFIG_HZ=250\n")
    files = {"/proc/config.gz": good[:len(good) // 2] if damage == "truncated" else b"junk",
             f"/boot/config-{os.uname().release}": b"# from /boot\nCONFIG_HZ=1000\nCONFIG_X=y\n"}

    def fake_open(path, mode="r", *a, **k):
        data = files[path]
        return io.BytesIO(data) if "b" in mode else io.StringIO(data.decode())
    monkeypatch.setattr(loading, "open", fake_open, raising=False)
    assert loading.kernel_config() == {"CONFIG_HZ": "1000", "CONFIG_X": "y"}
