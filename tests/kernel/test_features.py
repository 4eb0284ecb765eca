"""Feature probes against the running kernel."""
from __future__ import annotations

import pytest

from pyebpf.kernel import features as F
from pyebpf.kernel.constants import MapType, ProgType

# (each test that needs the kernel is marked `kernel`; the others run under every Python)


@pytest.mark.kernel
@pytest.mark.parametrize("t", [MapType.HASH, MapType.ARRAY, MapType.RINGBUF,
                               MapType.PERCPU_ARRAY, MapType.QUEUE, MapType.STACK_TRACE,
                               MapType.PERF_EVENT_ARRAY, MapType.LRU_HASH])
def test_common_map_types(t, no_fd_leak):
    f = F.has_map_type(t)
    assert f.supported and bool(f), f.reason
    assert t.name in f.reason


@pytest.mark.kernel
def test_unknown_map_type(no_fd_leak):
    f = F.has_map_type(9999)
    assert not f and "not available" in f.reason


@pytest.mark.kernel
@pytest.mark.parametrize("t", [ProgType.KPROBE, ProgType.SOCKET_FILTER, ProgType.XDP,
                               ProgType.TRACEPOINT, ProgType.RAW_TRACEPOINT,
                               ProgType.PERF_EVENT])
def test_common_prog_types(t, no_fd_leak):
    f = F.has_prog_type(t)
    assert f, f.reason


@pytest.mark.kernel
def test_unknown_prog_type():
    f = F.has_prog_type(999)
    assert not f and f.reason


@pytest.mark.kernel
def test_helpers(no_fd_leak):
    assert F.has_helper(ProgType.KPROBE, 1)              # map_lookup_elem
    assert F.has_helper(ProgType.KPROBE, 14)             # get_current_pid_tgid
    unknown = F.has_helper(ProgType.KPROBE, 9999)
    assert not unknown and "does not know helper #9999" in unknown.reason
    # skb_load_bytes (26) is for socket filters, not for kprobes; get_stackid (27)
    # the other way round
    assert F.has_helper(ProgType.SOCKET_FILTER, 26)
    wrong_type = F.has_helper(ProgType.KPROBE, 26)
    assert not wrong_type and "cannot use helper" in wrong_type.reason
    assert F.has_helper(ProgType.KPROBE, 27)
    assert not F.has_helper(ProgType.SOCKET_FILTER, 27)


@pytest.mark.kernel
def test_link_features():
    assert F.has_perf_link(), F.has_perf_link().reason
    assert F.has_uprobe_multi(), F.has_uprobe_multi().reason
    assert F.has_bpf_cookie(), F.has_bpf_cookie().reason
    assert F.has_map_batch(), F.has_map_batch().reason


@pytest.mark.kernel
def test_pmus():
    kp = F.has_kprobe_pmu()
    assert isinstance(kp.reason, str) and kp.reason
    if not kp:                      # this project's kernel has no kprobes
        assert "kprobe" in kp.reason and "CONFIG_KPROBES" in kp.reason
    up = F.has_uprobe_pmu()
    assert up, up.reason
    assert "type" in up.reason


def test_kernel_version():
    v = F.kernel_version()
    assert len(v) == 3 and v >= (4, 0, 0)
    assert F.kernel_version_code() == (v[0] << 16) + (v[1] << 8) + min(v[2], 255)


@pytest.mark.kernel
def test_results_are_cached():
    assert F.has_map_type(MapType.HASH) is F.has_map_type(MapType.HASH)
    assert F.has_kprobe_pmu() is F.has_kprobe_pmu()


@pytest.mark.kernel
def test_btf_kind_probes(no_fd_leak):
    # every kind the object loader may fix up is taken by a kernel of 6.0+
    if F.kernel_version() < (6, 0):
        pytest.skip("the kernel predates ENUM64")
    for kind, (name, since) in F.BTF_KINDS.items():
        f = F.has_btf_kind(kind)
        assert f and f.name == name and f"Linux {since}+" in f.reason, f
    assert F.has_btf_func_global()
    # the probe blob says no when the kernel refuses it (a kind no kernel has)
    import struct

    from pyebpf.kernel.btfprobe import _btf_probe
    ok, why = _btf_probe("kind 31", "99", struct.pack("<III", 5, 31 << 24, 4), b"f\0")
    assert not ok and "Invalid kind:31" in why
