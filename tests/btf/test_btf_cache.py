"""The kernel BTF's index cache (pyebpf.btf.indexcache): a second open of
/sys/kernel/btf/vmlinux reads the index instead of walking the records, and
gives the same answers; a damaged, foreign, stale or unwritable cache is
never an error, only a slower open; concurrent writers leave one whole file."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyebpf.btf import Btf, Kind, indexcache, reader

VMLINUX = "/sys/kernel/btf/vmlinux"
pytestmark = pytest.mark.skipif(not os.path.exists(VMLINUX),
                                reason="this kernel has no /sys/kernel/btf/vmlinux")
NAMES = ["task_struct", "sk_buff", "pid", "file", "inode", "mm_struct", "bpf_map", "int",
         "no_such_type_anywhere", "btf_trace_sched_switch", "bpf_iter_task"]
PREFIXES = ["task_", "btf_trace_sched", "bpf_iter_", "zzzz"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYEBPF_BTF_CACHE", str(tmp_path))
    return tmp_path


def _answers(btf: Btf) -> list:
    out: list = [len(btf)]
    out += [btf.find(n) for n in NAMES]
    out += [btf.find("task_struct", Kind.STRUCT), btf.find("pid", Kind.ENUM)]
    out += [btf.find_prefixed(p) for p in PREFIXES]
    step = max(len(btf) // 500, 1)
    out += [btf[i] for i in range(1, len(btf), step)]
    return out


@pytest.fixture(scope="module")
def uncached() -> list:
    return _answers(Btf.load(VMLINUX, cache=False))


def _no_walk(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the records were walked: the cache was not used")
    monkeypatch.setattr(reader, "_record_offsets", refuse)


def test_second_open_reads_the_index(cache, monkeypatch, uncached):
    first = Btf.vmlinux()
    (written,) = cache.iterdir()
    assert written.name.startswith("btf-vmlinux-") and written.stat().st_size > 100000
    assert _answers(first) == uncached
    _no_walk(monkeypatch)
    second = Btf.vmlinux()
    assert second._by_name is not None
    assert _answers(second) == uncached


def test_no_cache_when_off(tmp_path, monkeypatch, uncached):
    monkeypatch.setenv("PYEBPF_BTF_CACHE", "0")
    assert indexcache.cache_dir() is None
    assert _answers(Btf.vmlinux()) == uncached
    assert not list(tmp_path.iterdir())


def test_default_places(monkeypatch, tmp_path):
    monkeypatch.delenv("PYEBPF_BTF_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert indexcache.cache_dir() == str(tmp_path / "pyebpf")
    monkeypatch.delenv("XDG_CACHE_HOME")
    expected = ("/var/cache/pyebpf" if os.geteuid() == 0
                else os.path.expanduser("~/.cache/pyebpf"))
    assert indexcache.cache_dir() == expected


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty", "other_key"])
def test_damaged_cache_is_ignored_and_rewritten(cache, monkeypatch, uncached, damage):
    Btf.vmlinux()
    (path,) = cache.iterdir()
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0x40
    elif damage == "truncate":
        del raw[len(raw) // 3:]
    elif damage == "garbage":
        raw = bytearray(b"\x17" * 1000)
    elif damage == "empty":
        raw = bytearray()
    else:                                   # a well-formed file with another key
        monkeypatch.setattr(indexcache, "identity", lambda st, data: b"another kernel")
        Btf.vmlinux()
        monkeypatch.undo()
        monkeypatch.setenv("PYEBPF_BTF_CACHE", str(cache))
        raw = bytearray(path.read_bytes())
    path.write_bytes(bytes(raw))
    btf = Btf.vmlinux()
    assert _answers(btf) == uncached
    # the damaged file was replaced by a good one
    _no_walk(monkeypatch)
    assert _answers(Btf.vmlinux()) == uncached


def test_an_index_of_another_blob_is_refused(uncached):
    # right format, wrong data: the spot checks see the record lengths differ
    mine = Btf.load(VMLINUX, cache=False)
    offsets = list(mine._offsets)
    offsets[len(offsets) // 2] += 1
    for k in range(len(offsets) // 2, len(offsets)):
        offsets[k] += 1
    mine._sort_names()
    other = Btf(mine.data, name=VMLINUX, index=(offsets, mine._by_name))
    assert other._offsets == mine._offsets
    assert _answers(other) == uncached


def test_an_index_naming_ids_past_the_end_falls_back_to_the_scan(uncached):
    mine = Btf.load(VMLINUX, cache=False)
    mine._sort_names()
    by_name = list(mine._by_name)
    by_name[len(by_name) // 2] = len(mine) + 1000      # not caught by the spot checks
    other = Btf(mine.data, name=VMLINUX, index=(mine._offsets, by_name))
    assert other._by_name is not None
    assert _answers(other) == uncached
    assert other._by_name is None


def test_foreign_owned_cache_is_not_read(cache, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    Btf.vmlinux()
    (path,) = cache.iterdir()
    os.chown(path, 65534, 65534)
    walked = []
    real = reader._record_offsets
    monkeypatch.setattr(reader, "_record_offsets", lambda *a: walked.append(1) or real(*a))
    Btf.vmlinux()
    assert walked


@pytest.mark.parametrize("where", ["a_file", "unwritable"])
def test_unusable_cache_directory_is_silent(tmp_path, monkeypatch, uncached, where):
    if where == "a_file":
        target = tmp_path / "plain"
        target.write_text("not a directory")
    else:
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
        if os.geteuid() == 0:          # root writes anyway: use a read-only place
            target = "/proc/pyebpf-cache"
    monkeypatch.setenv("PYEBPF_BTF_CACHE", str(target))
    assert _answers(Btf.vmlinux()) == uncached


def test_concurrent_writers_leave_one_good_file(cache, uncached):
    code = ("from pyebpf.btf import Btf; b = Btf.vmlinux(); "
            "print(len(b), b.find('task_struct'))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = {p.communicate()[0] for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert outs == {f"{uncached[0]} {uncached[1]}\n"}
    (path,) = cache.iterdir()               # no temporary file left behind
    assert indexcache.load(VMLINUX, indexcache.identity(
        os.stat(VMLINUX), Btf.load(VMLINUX, cache=False).data)) is not None


def test_lookups_by_name_agree_with_the_scan(uncached):
    # the sorted index (binary search) and the string-table scan find the same ids
    scan = Btf.load(VMLINUX, cache=False)
    sorted_ = Btf.load(VMLINUX, cache=False)
    sorted_._sort_names()
    step = max(len(scan) // 60, 1)
    names = {scan[i].name for i in range(1, len(scan), step)} - {""}
    for name in sorted(names):
        assert sorted_.find(name) == scan.find(name), name
    for prefix in {name[:5] for name in names}:
        assert sorted_.find_prefixed(prefix) == scan.find_prefixed(prefix), prefix


def test_split_btf_of_a_module_is_cached_on_its_base(tmp_path, monkeypatch):
    # a module's split BTF (ids and string offsets after vmlinux's), as the
    # kernel's files: mapped and cached; names of the base and of its own
    from pyebpf.btf import BtfBuilder
    kdir = tmp_path / "btf"
    kdir.mkdir()
    monkeypatch.setattr(reader, "KERNEL_BTF_DIR", f"{kdir}/")
    monkeypatch.setenv("PYEBPF_BTF_CACHE", str(tmp_path / "cache"))
    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)
    b.add_struct("base_s", 4, [("x", u32, 0)])
    (kdir / "vmlinux").write_bytes(b.build())
    base = Btf.load(f"{kdir}/vmlinux")
    s = BtfBuilder(base=base)
    ptr = s.add_ptr(2)
    s.add_struct("mod_s", 16, [("p", ptr, 0), ("y", u32, 64)])
    s.add_struct("mod_s___v2", 16, [("p", ptr, 0)])
    s.add_typedef("base_s", 2)
    (kdir / "mod").write_bytes(s.build())

    def answers(btf: Btf) -> list:
        return [btf.find("mod_s"), btf.find("base_s"), btf.find("base_s", Kind.TYPEDEF),
                btf.find_prefixed("mod_s"), btf.find_prefixed("base"), btf.find("x"),
                [btf[i] for i in range(len(btf))]]
    uncached = answers(Btf.load(f"{kdir}/mod", base=Btf.load(f"{kdir}/vmlinux", cache=False),
                                cache=False))
    assert uncached[:4] == [[4], [2, 6], [6], [4, 5]]
    first = Btf.load(f"{kdir}/mod", base=base)
    assert sorted(p.name.split("-")[1] for p in (tmp_path / "cache").iterdir()) == \
        ["mod", "vmlinux"]
    _no_walk(monkeypatch)
    again = Btf.load(f"{kdir}/mod", base=Btf.load(f"{kdir}/vmlinux"))
    assert answers(first) == answers(again) == uncached
