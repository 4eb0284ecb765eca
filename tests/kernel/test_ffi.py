"""The cffi layouts against the offsets of shared/reference/kernel-uapi.md.

Every ``name off:size`` the reference lists is transcribed below (data, not
code) and compared with ``ffi.offsetof``/``ffi.sizeof``.  Pure: no kernel.
"""
from __future__ import annotations

import pytest

from pyebpf.kernel.ffi import ffi, offsetofend

# (C type, member path, offset, size or None)
A = "union bpf_attr"
REFERENCE: list[tuple[str, str, int, int | None]] = [
    # MAP_CREATE
    (A, "map_create.map_type", 0, 4), (A, "map_create.key_size", 4, 4),
    (A, "map_create.value_size", 8, 4), (A, "map_create.max_entries", 12, 4),
    (A, "map_create.map_flags", 16, 4), (A, "map_create.inner_map_fd", 20, 4),
    (A, "map_create.numa_node", 24, 4), (A, "map_create.map_name", 28, 16),
    (A, "map_create.map_ifindex", 44, 4), (A, "map_create.btf_fd", 48, 4),
    (A, "map_create.btf_key_type_id", 52, 4), (A, "map_create.btf_value_type_id", 56, 4),
    (A, "map_create.btf_vmlinux_value_type_id", 60, 4), (A, "map_create.map_extra", 64, 8),
    (A, "map_create.value_type_btf_obj_fd", 72, 4), (A, "map_create.map_token_fd", 76, 4),
    (A, "map_create.excl_prog_hash", 80, 8), (A, "map_create.excl_prog_hash_size", 88, 4),
    # MAP_*_ELEM / MAP_FREEZE
    (A, "elem.map_fd", 0, 4), (A, "elem.key", 8, 8), (A, "elem.value", 16, 8),
    (A, "elem.next_key", 16, 8), (A, "elem.flags", 24, 8),
    # MAP_*_BATCH
    (A, "batch.in_batch", 0, 8), (A, "batch.out_batch", 8, 8), (A, "batch.keys", 16, 8),
    (A, "batch.values", 24, 8), (A, "batch.count", 32, 4), (A, "batch.map_fd", 36, 4),
    (A, "batch.elem_flags", 40, 8), (A, "batch.flags", 48, 8),
    # PROG_LOAD
    (A, "prog_load.prog_type", 0, 4), (A, "prog_load.insn_cnt", 4, 4),
    (A, "prog_load.insns", 8, 8), (A, "prog_load.license", 16, 8),
    (A, "prog_load.log_level", 24, 4), (A, "prog_load.log_size", 28, 4),
    (A, "prog_load.log_buf", 32, 8), (A, "prog_load.kern_version", 40, 4),
    (A, "prog_load.prog_flags", 44, 4), (A, "prog_load.prog_name", 48, 16),
    (A, "prog_load.prog_ifindex", 64, 4), (A, "prog_load.expected_attach_type", 68, 4),
    (A, "prog_load.prog_btf_fd", 72, 4), (A, "prog_load.func_info_rec_size", 76, 4),
    (A, "prog_load.func_info", 80, 8), (A, "prog_load.func_info_cnt", 88, 4),
    (A, "prog_load.line_info_rec_size", 92, 4), (A, "prog_load.line_info", 96, 8),
    (A, "prog_load.line_info_cnt", 104, 4), (A, "prog_load.attach_btf_id", 108, 4),
    (A, "prog_load.attach_prog_fd", 112, 4), (A, "prog_load.attach_btf_obj_fd", 112, 4),
    (A, "prog_load.core_relo_cnt", 116, 4), (A, "prog_load.fd_array", 120, 8),
    (A, "prog_load.core_relos", 128, 8), (A, "prog_load.core_relo_rec_size", 136, 4),
    (A, "prog_load.log_true_size", 140, 4), (A, "prog_load.prog_token_fd", 144, 4),
    (A, "prog_load.fd_array_cnt", 148, 4), (A, "prog_load.signature", 152, 8),
    (A, "prog_load.signature_size", 160, 4), (A, "prog_load.keyring_id", 164, 4),
    # OBJ_PIN / OBJ_GET
    (A, "obj.pathname", 0, 8), (A, "obj.bpf_fd", 8, 4), (A, "obj.file_flags", 12, 4),
    (A, "obj.path_fd", 16, 4),
    # PROG_TEST_RUN
    (A, "test.prog_fd", 0, 4), (A, "test.retval", 4, 4), (A, "test.data_size_in", 8, 4),
    (A, "test.data_size_out", 12, 4), (A, "test.data_in", 16, 8), (A, "test.data_out", 24, 8),
    (A, "test.repeat", 32, 4), (A, "test.duration", 36, 4), (A, "test.ctx_size_in", 40, 4),
    (A, "test.ctx_size_out", 44, 4), (A, "test.ctx_in", 48, 8), (A, "test.ctx_out", 56, 8),
    (A, "test.flags", 64, 4), (A, "test.cpu", 68, 4), (A, "test.batch_size", 72, 4),
    # GET_*_ID / GET_FD_BY_ID
    (A, "get_id.start_id", 0, 4), (A, "get_id.prog_id", 0, 4), (A, "get_id.map_id", 0, 4),
    (A, "get_id.btf_id", 0, 4), (A, "get_id.link_id", 0, 4), (A, "get_id.next_id", 4, 4),
    (A, "get_id.open_flags", 8, 4),
    # OBJ_GET_INFO_BY_FD
    (A, "info.bpf_fd", 0, 4), (A, "info.info_len", 4, 4), (A, "info.info", 8, 8),
    # LINK_CREATE
    (A, "link_create.prog_fd", 0, 4), (A, "link_create.map_fd", 0, 4),
    (A, "link_create.target_fd", 4, 4), (A, "link_create.target_ifindex", 4, 4),
    (A, "link_create.attach_type", 8, 4), (A, "link_create.flags", 12, 4),
    (A, "link_create.perf_event.bpf_cookie", 16, 8),
    (A, "link_create.kprobe_multi.flags", 16, 4), (A, "link_create.kprobe_multi.cnt", 20, 4),
    (A, "link_create.kprobe_multi.syms", 24, 8), (A, "link_create.kprobe_multi.addrs", 32, 8),
    (A, "link_create.kprobe_multi.cookies", 40, 8),
    (A, "link_create.uprobe_multi.path", 16, 8), (A, "link_create.uprobe_multi.offsets", 24, 8),
    (A, "link_create.uprobe_multi.ref_ctr_offsets", 32, 8),
    (A, "link_create.uprobe_multi.cookies", 40, 8), (A, "link_create.uprobe_multi.cnt", 48, 4),
    (A, "link_create.uprobe_multi.flags", 52, 4), (A, "link_create.uprobe_multi.pid", 56, 4),
    (A, "link_create.uprobe_multi.path_fd", 60, 4),
    # RAW_TRACEPOINT_OPEN
    (A, "raw_tracepoint.name", 0, 8), (A, "raw_tracepoint.prog_fd", 8, 4),
    (A, "raw_tracepoint.cookie", 16, 8),
    # TASK_FD_QUERY
    (A, "task_fd_query.pid", 0, 4), (A, "task_fd_query.fd", 4, 4),
    (A, "task_fd_query.flags", 8, 4), (A, "task_fd_query.buf_len", 12, 4),
    (A, "task_fd_query.buf", 16, 8), (A, "task_fd_query.prog_id", 24, 4),
    (A, "task_fd_query.fd_type", 28, 4), (A, "task_fd_query.probe_offset", 32, 8),
    (A, "task_fd_query.probe_addr", 40, 8),
    # ENABLE_STATS (header: first member of its struct)
    (A, "enable_stats.type", 0, 4),
    # struct bpf_prog_info
    ("struct bpf_prog_info", "type", 0, 4), ("struct bpf_prog_info", "id", 4, 4),
    ("struct bpf_prog_info", "tag", 8, 8), ("struct bpf_prog_info", "jited_prog_len", 16, 4),
    ("struct bpf_prog_info", "xlated_prog_len", 20, 4),
    ("struct bpf_prog_info", "jited_prog_insns", 24, 8),
    ("struct bpf_prog_info", "xlated_prog_insns", 32, 8),
    ("struct bpf_prog_info", "load_time", 40, 8), ("struct bpf_prog_info", "created_by_uid", 48, 4),
    ("struct bpf_prog_info", "nr_map_ids", 52, 4), ("struct bpf_prog_info", "map_ids", 56, 8),
    ("struct bpf_prog_info", "name", 64, 16), ("struct bpf_prog_info", "run_time_ns", 192, 8),
    ("struct bpf_prog_info", "run_cnt", 200, 8),
    # struct bpf_map_info
    ("struct bpf_map_info", "type", 0, 4), ("struct bpf_map_info", "id", 4, 4),
    ("struct bpf_map_info", "key_size", 8, 4), ("struct bpf_map_info", "value_size", 12, 4),
    ("struct bpf_map_info", "max_entries", 16, 4), ("struct bpf_map_info", "map_flags", 20, 4),
    ("struct bpf_map_info", "name", 24, 16),
    # struct bpf_link_info
    ("struct bpf_link_info", "type", 0, 4), ("struct bpf_link_info", "id", 4, 4),
    ("struct bpf_link_info", "prog_id", 8, 4),
    ("struct bpf_link_info", "uprobe_multi.path", 16, 8),
    ("struct bpf_link_info", "uprobe_multi.offsets", 24, 8),
    ("struct bpf_link_info", "uprobe_multi.ref_ctr_offsets", 32, 8),
    ("struct bpf_link_info", "uprobe_multi.cookies", 40, 8),
    ("struct bpf_link_info", "uprobe_multi.path_size", 48, 4),
    ("struct bpf_link_info", "uprobe_multi.count", 52, 4),
    ("struct bpf_link_info", "uprobe_multi.flags", 56, 4),
    ("struct bpf_link_info", "uprobe_multi.pid", 60, 4),
    # struct perf_event_attr
    ("struct perf_event_attr", "type", 0, 4), ("struct perf_event_attr", "size", 4, 4),
    ("struct perf_event_attr", "config", 8, 8), ("struct perf_event_attr", "sample_period", 16, 8),
    ("struct perf_event_attr", "sample_freq", 16, 8),
    ("struct perf_event_attr", "sample_type", 24, 8),
    ("struct perf_event_attr", "read_format", 32, 8), ("struct perf_event_attr", "flags", 40, 8),
    ("struct perf_event_attr", "wakeup_events", 48, 4),
    ("struct perf_event_attr", "wakeup_watermark", 48, 4),
    ("struct perf_event_attr", "bp_type", 52, 4), ("struct perf_event_attr", "config1", 56, 8),
    ("struct perf_event_attr", "uprobe_path", 56, 8),
    ("struct perf_event_attr", "kprobe_func", 56, 8), ("struct perf_event_attr", "bp_addr", 56, 8),
    ("struct perf_event_attr", "config2", 64, 8), ("struct perf_event_attr", "probe_offset", 64, 8),
    ("struct perf_event_attr", "kprobe_addr", 64, 8), ("struct perf_event_attr", "bp_len", 64, 8),
    ("struct perf_event_attr", "branch_sample_type", 72, 8),
    ("struct perf_event_attr", "sample_regs_user", 80, 8),
    ("struct perf_event_attr", "sample_stack_user", 88, 4),
    ("struct perf_event_attr", "clockid", 92, 4),
    ("struct perf_event_attr", "sample_regs_intr", 96, 8),
    ("struct perf_event_attr", "aux_watermark", 104, 4),
    ("struct perf_event_attr", "sample_max_stack", 108, 2),
    ("struct perf_event_attr", "aux_sample_size", 112, 4),
    ("struct perf_event_attr", "sig_data", 120, 8), ("struct perf_event_attr", "config3", 128, 8),
    ("struct perf_event_attr", "config4", 136, 8),
    # struct perf_event_mmap_page
    ("struct perf_event_mmap_page", "version", 0, 4),
    ("struct perf_event_mmap_page", "compat_version", 4, 4),
    ("struct perf_event_mmap_page", "lock", 8, 4), ("struct perf_event_mmap_page", "index", 12, 4),
    ("struct perf_event_mmap_page", "offset", 16, 8),
    ("struct perf_event_mmap_page", "time_enabled", 24, 8),
    ("struct perf_event_mmap_page", "time_running", 32, 8),
    ("struct perf_event_mmap_page", "capabilities", 40, 8),
    ("struct perf_event_mmap_page", "pmc_width", 48, 2),
    ("struct perf_event_mmap_page", "time_shift", 50, 2),
    ("struct perf_event_mmap_page", "time_mult", 52, 4),
    ("struct perf_event_mmap_page", "time_offset", 56, 8),
    ("struct perf_event_mmap_page", "time_zero", 64, 8),
    ("struct perf_event_mmap_page", "size", 72, 4),
    ("struct perf_event_mmap_page", "data_head", 1024, 8),
    ("struct perf_event_mmap_page", "data_tail", 1032, 8),
    ("struct perf_event_mmap_page", "data_offset", 1040, 8),
    ("struct perf_event_mmap_page", "data_size", 1048, 8),
    ("struct perf_event_mmap_page", "aux_head", 1056, 8),
    ("struct perf_event_mmap_page", "aux_tail", 1064, 8),
    ("struct perf_event_mmap_page", "aux_offset", 1072, 8),
    ("struct perf_event_mmap_page", "aux_size", 1080, 8),
    # struct perf_event_header
    ("struct perf_event_header", "type", 0, 4), ("struct perf_event_header", "misc", 4, 2),
    ("struct perf_event_header", "size", 6, 2),
]

SIZES = {
    "union bpf_attr": 168,
    "struct bpf_prog_info": 232,
    "struct bpf_map_info": 104,
    "struct bpf_link_info": 64,
    "struct perf_event_attr": 144,
    "struct perf_event_mmap_page": 1088,
    "struct perf_event_header": 8,
}


@pytest.mark.parametrize("ctype,path,offset,size", REFERENCE,
                         ids=[f"{c.split()[-1]}.{p}" for c, p, _, _ in REFERENCE])
def test_offset_matches_reference(ctype, path, offset, size):
    fields = path.split(".")
    assert ffi.offsetof(ctype, *fields) == offset
    if size is not None:
        assert offsetofend(ctype, *fields) - offset == size


@pytest.mark.parametrize("ctype,size", sorted(SIZES.items()))
def test_sizes_match_reference(ctype, size):
    assert ffi.sizeof(ctype) == size


def test_per_command_struct_sizes():
    # the reference gives these sizes for the per-command parts
    assert offsetofend("union bpf_attr", "elem", "flags") == 32
    assert offsetofend("union bpf_attr", "batch", "flags") == 56
    assert offsetofend("union bpf_attr", "test", "batch_size") <= 80
    assert ffi.sizeof("struct bpf_attr_test") == 80
    assert offsetofend("union bpf_attr", "link_create", "uprobe_multi", "path_fd") == 64


def test_generated_abi_module_is_current():
    """pyebpf/kernel/_ffi_abi.py (the pre-parsed CDEF, for fast start-up) must
    match CDEF; regenerate it with ``python -m pyebpf.kernel.ffi --regenerate``."""
    from pyebpf.kernel import _ffi_abi, ffi as ffi_mod
    assert _ffi_abi.CDEF_DIGEST == ffi_mod.CDEF_DIGEST
    assert ffi_mod.ffi is _ffi_abi.ffi
