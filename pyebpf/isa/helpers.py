"""The helper table: every helper id of the kernel's UAPI (0..211) with its
name, return kind, argument kinds and whether it is GPL-only.

Names and ids come from ``include/uapi/linux/bpf.h`` (``___BPF_FUNC_MAPPER``);
argument kinds were derived from the C signatures documented there; the
``gpl_only`` flags were read from a 6.18 kernel, which refuses a GPL-only
helper in a program whose licence is not GPL-compatible.

Argument kinds:

=================  ==========================================================
``ctx``            the program's context pointer (r1 at entry)
``map``            a map (an ``ld_imm64`` map reference)
``map_key``        pointer to an initialised key of the map's key size
``map_value``      pointer to an initialised value of the map's value size
``uninit_map_value`` pointer to value-size memory the helper writes
``mem``            pointer to initialised memory; the next ``size`` argument is its length
``uninit_mem``     pointer to memory the helper writes; the next ``size`` is its length
``size``           the length of the preceding memory argument
``scalar``         any integer
``anything``       any value, e.g. an unsafe pointer read through the helper
``ptr``            a kernel object pointer (socket, task, BTF pointer, dynptr...)
``func``           a callback function (``ld_imm64`` pseudo func)
``varargs``        further scalars (trace_printk)
=================  ==========================================================
"""
from __future__ import annotations

from .._record import Record, record
from ..errors import UnknownNameError, close_matches


@record
class Helper(Record):
    """One BPF helper function."""

    id: int
    name: str            #: without the ``bpf_`` prefix
    ret: str             #: ``scalar``, ``ptr`` (may be NULL) or ``void``
    args: tuple[str, ...]  #: argument kinds, see the module docstring
    gpl_only: bool

    @property
    def c_name(self) -> str:
        """The C name, ``bpf_`` + :attr:`name`."""
        return "bpf_" + self.name


# (duplicates: deliberate, one row per kernel helper: a table whose rows are alike by shape)
HELPERS: tuple[Helper, ...] = tuple(Helper(*row) for row in (
    (0, 'unspec', 'scalar', (), False),
    (1, 'map_lookup_elem', 'ptr', ('map', 'map_key'), False),
    (2, 'map_update_elem', 'scalar', ('map', 'map_key', 'map_value', 'scalar'), False),
    (3, 'map_delete_elem', 'scalar', ('map', 'map_key'), False),
    (4, 'probe_read', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (5, 'ktime_get_ns', 'scalar', (), False),
    (6, 'trace_printk', 'scalar', ('mem', 'size', 'varargs'), True),
    (7, 'get_prandom_u32', 'scalar', (), False),
    (8, 'get_smp_processor_id', 'scalar', (), False),
    (9, 'skb_store_bytes', 'scalar', ('ctx', 'scalar', 'mem', 'size', 'scalar'), False),
    (10, 'l3_csum_replace', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar', 'scalar'), False),
    (11, 'l4_csum_replace', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar', 'scalar'), False),
    (12, 'tail_call', 'scalar', ('ctx', 'map', 'scalar'), False),
    (13, 'clone_redirect', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (14, 'get_current_pid_tgid', 'scalar', (), False),
    (15, 'get_current_uid_gid', 'scalar', (), False),
    (16, 'get_current_comm', 'scalar', ('uninit_mem', 'size'), False),
    (17, 'get_cgroup_classid', 'scalar', ('ctx',), False),
    (18, 'skb_vlan_push', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (19, 'skb_vlan_pop', 'scalar', ('ctx',), False),
    (20, 'skb_get_tunnel_key', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), False),
    (21, 'skb_set_tunnel_key', 'scalar', ('ctx', 'mem', 'size', 'scalar'), False),
    (22, 'perf_event_read', 'scalar', ('map', 'scalar'), True),
    (23, 'redirect', 'scalar', ('scalar', 'scalar'), False),
    (24, 'get_route_realm', 'scalar', ('ctx',), False),
    (25, 'perf_event_output', 'scalar', ('ctx', 'map', 'scalar', 'mem', 'size'), True),
    (26, 'skb_load_bytes', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size'), False),
    (27, 'get_stackid', 'scalar', ('ctx', 'map', 'scalar'), True),
    (28, 'csum_diff', 'scalar', ('mem', 'size', 'mem', 'size', 'scalar'), False),
    (29, 'skb_get_tunnel_opt', 'scalar', ('ctx', 'uninit_mem', 'size'), False),
    (30, 'skb_set_tunnel_opt', 'scalar', ('ctx', 'mem', 'size'), False),
    (31, 'skb_change_proto', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (32, 'skb_change_type', 'scalar', ('ctx', 'scalar'), False),
    (33, 'skb_under_cgroup', 'scalar', ('ctx', 'map', 'scalar'), False),
    (34, 'get_hash_recalc', 'scalar', ('ctx',), False),
    (35, 'get_current_task', 'scalar', (), True),
    (36, 'probe_write_user', 'scalar', ('anything', 'mem', 'size'), False),
    (37, 'current_task_under_cgroup', 'scalar', ('map', 'scalar'), False),
    (38, 'skb_change_tail', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (39, 'skb_pull_data', 'scalar', ('ctx', 'scalar'), False),
    (40, 'csum_update', 'scalar', ('ctx', 'scalar'), False),
    (41, 'set_hash_invalid', 'void', ('ctx',), False),
    (42, 'get_numa_node_id', 'scalar', (), False),
    (43, 'skb_change_head', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (44, 'xdp_adjust_head', 'scalar', ('ctx', 'scalar'), False),
    (45, 'probe_read_str', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (46, 'get_socket_cookie', 'scalar', ('ptr',), False),
    (47, 'get_socket_uid', 'scalar', ('ctx',), False),
    (48, 'set_hash', 'scalar', ('ctx', 'scalar'), False),
    (49, 'setsockopt', 'scalar', ('ctx', 'scalar', 'scalar', 'uninit_mem', 'size'), False),
    (50, 'skb_adjust_room', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar'), False),
    (51, 'redirect_map', 'scalar', ('map', 'scalar', 'scalar'), False),
    (52, 'sk_redirect_map', 'scalar', ('ctx', 'map', 'scalar', 'scalar'), False),
    (53, 'sock_map_update', 'scalar', ('ctx', 'map', 'map_key', 'scalar'), False),
    (54, 'xdp_adjust_meta', 'scalar', ('ctx', 'scalar'), False),
    (55, 'perf_event_read_value', 'scalar', ('map', 'scalar', 'uninit_mem', 'size'), True),
    (56, 'perf_prog_read_value', 'scalar', ('ctx', 'uninit_mem', 'size'), True),
    (57, 'getsockopt', 'scalar', ('ctx', 'scalar', 'scalar', 'uninit_mem', 'size'), False),
    (58, 'override_return', 'scalar', ('ctx', 'scalar'), False),
    (59, 'sock_ops_cb_flags_set', 'scalar', ('ctx', 'scalar'), False),
    (60, 'msg_redirect_map', 'scalar', ('ctx', 'map', 'scalar', 'scalar'), False),
    (61, 'msg_apply_bytes', 'scalar', ('ctx', 'scalar'), False),
    (62, 'msg_cork_bytes', 'scalar', ('ctx', 'scalar'), False),
    (63, 'msg_pull_data', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar'), False),
    (64, 'bind', 'scalar', ('ctx', 'uninit_mem', 'size'), False),
    (65, 'xdp_adjust_tail', 'scalar', ('ctx', 'scalar'), False),
    (66, 'skb_get_xfrm_state', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size', 'scalar'), False),
    (67, 'get_stack', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), True),
    (68, 'skb_load_bytes_relative', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size', 'scalar'), False),
    (69, 'fib_lookup', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), True),
    (70, 'sock_hash_update', 'scalar', ('ctx', 'map', 'map_key', 'scalar'), False),
    (71, 'msg_redirect_hash', 'scalar', ('ctx', 'map', 'map_key', 'scalar'), False),
    (72, 'sk_redirect_hash', 'scalar', ('ctx', 'map', 'map_key', 'scalar'), False),
    (73, 'lwt_push_encap', 'scalar', ('ctx', 'scalar', 'mem', 'size'), False),
    (74, 'lwt_seg6_store_bytes', 'scalar', ('ctx', 'scalar', 'mem', 'size'), False),
    (75, 'lwt_seg6_adjust_srh', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (76, 'lwt_seg6_action', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size'), False),
    (77, 'rc_repeat', 'scalar', ('ctx',), False),
    (78, 'rc_keydown', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar'), False),
    (79, 'skb_cgroup_id', 'scalar', ('ctx',), False),
    (80, 'get_current_cgroup_id', 'scalar', (), False),
    (81, 'get_local_storage', 'ptr', ('map', 'scalar'), False),
    (82, 'sk_select_reuseport', 'scalar', ('ctx', 'map', 'map_key', 'scalar'), False),
    (83, 'skb_ancestor_cgroup_id', 'scalar', ('ctx', 'scalar'), False),
    (84, 'sk_lookup_tcp', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar', 'scalar'), False),
    (85, 'sk_lookup_udp', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar', 'scalar'), False),
    (86, 'sk_release', 'scalar', ('ptr',), False),
    (87, 'map_push_elem', 'scalar', ('map', 'map_value', 'scalar'), False),
    (88, 'map_pop_elem', 'scalar', ('map', 'uninit_map_value'), False),
    (89, 'map_peek_elem', 'scalar', ('map', 'uninit_map_value'), False),
    (90, 'msg_push_data', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar'), False),
    (91, 'msg_pop_data', 'scalar', ('ctx', 'scalar', 'scalar', 'scalar'), False),
    (92, 'rc_pointer_rel', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (93, 'spin_lock', 'scalar', ('ptr',), False),
    (94, 'spin_unlock', 'scalar', ('ptr',), False),
    (95, 'sk_fullsock', 'scalar', ('ptr',), False),
    (96, 'tcp_sock', 'scalar', ('ptr',), False),
    (97, 'skb_ecn_set_ce', 'scalar', ('ctx',), False),
    (98, 'get_listener_sock', 'scalar', ('ptr',), False),
    (99, 'skc_lookup_tcp', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar', 'scalar'), False),
    (100, 'tcp_check_syncookie', 'scalar', ('ptr', 'uninit_mem', 'size', 'uninit_mem', 'size'), True),
    (101, 'sysctl_get_name', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), False),
    (102, 'sysctl_get_current_value', 'scalar', ('ctx', 'uninit_mem', 'size'), False),
    (103, 'sysctl_get_new_value', 'scalar', ('ctx', 'uninit_mem', 'size'), False),
    (104, 'sysctl_set_new_value', 'scalar', ('ctx', 'mem', 'size'), False),
    (105, 'strtol', 'scalar', ('mem', 'size', 'scalar', 'ptr'), False),
    (106, 'strtoul', 'scalar', ('mem', 'size', 'scalar', 'ptr'), False),
    (107, 'sk_storage_get', 'ptr', ('map', 'ptr', 'map_value', 'scalar'), False),
    (108, 'sk_storage_delete', 'scalar', ('map', 'ptr'), False),
    (109, 'send_signal', 'scalar', ('scalar',), False),
    (110, 'tcp_gen_syncookie', 'scalar', ('ptr', 'uninit_mem', 'size', 'uninit_mem', 'size'), True),
    (111, 'skb_output', 'scalar', ('ctx', 'map', 'scalar', 'mem', 'size'), False),
    (112, 'probe_read_user', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (113, 'probe_read_kernel', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (114, 'probe_read_user_str', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (115, 'probe_read_kernel_str', 'scalar', ('uninit_mem', 'size', 'anything'), True),
    (116, 'tcp_send_ack', 'scalar', ('ptr', 'scalar'), False),
    (117, 'send_signal_thread', 'scalar', ('scalar',), False),
    (118, 'jiffies64', 'scalar', (), False),
    (119, 'read_branch_records', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), True),
    (120, 'get_ns_current_pid_tgid', 'scalar', ('scalar', 'scalar', 'uninit_mem', 'size'), False),
    (121, 'xdp_output', 'scalar', ('ctx', 'map', 'scalar', 'mem', 'size'), False),
    (122, 'get_netns_cookie', 'scalar', ('ctx',), False),
    (123, 'get_current_ancestor_cgroup_id', 'scalar', ('scalar',), False),
    (124, 'sk_assign', 'scalar', ('ctx', 'ptr', 'scalar'), False),
    (125, 'ktime_get_boot_ns', 'scalar', (), False),
    (126, 'seq_printf', 'scalar', ('ptr', 'mem', 'size', 'mem', 'size'), False),
    (127, 'seq_write', 'scalar', ('ptr', 'mem', 'size'), False),
    (128, 'sk_cgroup_id', 'scalar', ('ptr',), False),
    (129, 'sk_ancestor_cgroup_id', 'scalar', ('ptr', 'scalar'), False),
    (130, 'ringbuf_output', 'scalar', ('map', 'mem', 'size', 'scalar'), False),
    (131, 'ringbuf_reserve', 'ptr', ('map', 'scalar', 'scalar'), False),
    (132, 'ringbuf_submit', 'void', ('ptr', 'scalar'), False),
    (133, 'ringbuf_discard', 'void', ('ptr', 'scalar'), False),
    (134, 'ringbuf_query', 'scalar', ('map', 'scalar'), False),
    (135, 'csum_level', 'scalar', ('ctx', 'scalar'), False),
    (136, 'skc_to_tcp6_sock', 'ptr', ('ptr',), False),
    (137, 'skc_to_tcp_sock', 'ptr', ('ptr',), False),
    (138, 'skc_to_tcp_timewait_sock', 'ptr', ('ptr',), False),
    (139, 'skc_to_tcp_request_sock', 'ptr', ('ptr',), False),
    (140, 'skc_to_udp6_sock', 'ptr', ('ptr',), False),
    (141, 'get_task_stack', 'scalar', ('ptr', 'uninit_mem', 'size', 'scalar'), False),
    (142, 'load_hdr_opt', 'scalar', ('ctx', 'uninit_mem', 'size', 'scalar'), False),
    (143, 'store_hdr_opt', 'scalar', ('ctx', 'mem', 'size', 'scalar'), False),
    (144, 'reserve_hdr_opt', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (145, 'inode_storage_get', 'ptr', ('map', 'ptr', 'map_value', 'scalar'), False),
    (146, 'inode_storage_delete', 'scalar', ('map', 'ptr'), False),
    (147, 'd_path', 'scalar', ('ptr', 'uninit_mem', 'size'), False),
    (148, 'copy_from_user', 'scalar', ('uninit_mem', 'size', 'anything'), False),
    (149, 'snprintf_btf', 'scalar', ('uninit_mem', 'size', 'uninit_mem', 'size', 'scalar'), False),
    (150, 'seq_printf_btf', 'scalar', ('ptr', 'uninit_mem', 'size', 'scalar'), False),
    (151, 'skb_cgroup_classid', 'scalar', ('ctx',), False),
    (152, 'redirect_neigh', 'scalar', ('scalar', 'uninit_mem', 'size', 'scalar'), False),
    (153, 'per_cpu_ptr', 'ptr', ('ptr', 'scalar'), False),
    (154, 'this_cpu_ptr', 'ptr', ('ptr',), False),
    (155, 'redirect_peer', 'scalar', ('scalar', 'scalar'), False),
    (156, 'task_storage_get', 'ptr', ('map', 'ptr', 'map_value', 'scalar'), False),
    (157, 'task_storage_delete', 'scalar', ('map', 'ptr'), False),
    (158, 'get_current_task_btf', 'ptr', (), True),
    (159, 'bprm_opts_set', 'scalar', ('ptr', 'scalar'), False),
    (160, 'ktime_get_coarse_ns', 'scalar', (), False),
    (161, 'ima_inode_hash', 'scalar', ('ptr', 'uninit_mem', 'size'), False),
    (162, 'sock_from_file', 'ptr', ('ptr',), False),
    (163, 'check_mtu', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size', 'scalar'), True),
    (164, 'for_each_map_elem', 'scalar', ('map', 'func', 'ptr', 'scalar'), False),
    (165, 'snprintf', 'scalar', ('uninit_mem', 'size', 'ptr', 'mem', 'size'), True),
    (166, 'sys_bpf', 'scalar', ('scalar', 'uninit_mem', 'size'), False),
    (167, 'btf_find_by_name_kind', 'scalar', ('uninit_mem', 'size', 'scalar', 'scalar'), False),
    (168, 'sys_close', 'scalar', ('scalar',), False),
    (169, 'timer_init', 'scalar', ('ptr', 'map', 'scalar'), True),
    (170, 'timer_set_callback', 'scalar', ('ptr', 'func'), True),
    (171, 'timer_start', 'scalar', ('ptr', 'scalar', 'scalar'), True),
    (172, 'timer_cancel', 'scalar', ('ptr',), True),
    (173, 'get_func_ip', 'scalar', ('ctx',), True),
    (174, 'get_attach_cookie', 'scalar', ('ctx',), False),
    (175, 'task_pt_regs', 'scalar', ('ptr',), True),
    (176, 'get_branch_snapshot', 'scalar', ('uninit_mem', 'size', 'scalar'), True),
    (177, 'trace_vprintk', 'scalar', ('mem', 'size', 'mem', 'size'), True),
    (178, 'skc_to_unix_sock', 'ptr', ('ptr',), False),
    (179, 'kallsyms_lookup_name', 'scalar', ('mem', 'size', 'scalar', 'ptr'), False),
    (180, 'find_vma', 'scalar', ('ptr', 'scalar', 'func', 'ptr', 'scalar'), False),
    (181, 'loop', 'scalar', ('scalar', 'func', 'ptr', 'scalar'), False),
    (182, 'strncmp', 'scalar', ('mem', 'size', 'ptr'), False),
    (183, 'get_func_arg', 'scalar', ('ctx', 'scalar', 'ptr'), False),
    (184, 'get_func_ret', 'scalar', ('ctx', 'ptr'), False),
    (185, 'get_func_arg_cnt', 'scalar', ('ctx',), False),
    (186, 'get_retval', 'scalar', (), False),
    (187, 'set_retval', 'scalar', ('scalar',), False),
    (188, 'xdp_get_buff_len', 'scalar', ('ctx',), False),
    (189, 'xdp_load_bytes', 'scalar', ('ctx', 'scalar', 'uninit_mem', 'size'), False),
    (190, 'xdp_store_bytes', 'scalar', ('ctx', 'scalar', 'mem', 'size'), False),
    (191, 'copy_from_user_task', 'scalar', ('uninit_mem', 'size', 'anything', 'ptr', 'scalar'), True),
    (192, 'skb_set_tstamp', 'scalar', ('ctx', 'scalar', 'scalar'), False),
    (193, 'ima_file_hash', 'scalar', ('ptr', 'uninit_mem', 'size'), False),
    (194, 'kptr_xchg', 'ptr', ('ptr', 'ptr'), False),
    (195, 'map_lookup_percpu_elem', 'ptr', ('map', 'map_key', 'scalar'), False),
    (196, 'skc_to_mptcp_sock', 'ptr', ('ptr',), False),
    (197, 'dynptr_from_mem', 'scalar', ('mem', 'size', 'scalar', 'ptr'), False),
    (198, 'ringbuf_reserve_dynptr', 'scalar', ('map', 'scalar', 'scalar', 'ptr'), False),
    (199, 'ringbuf_submit_dynptr', 'void', ('ptr', 'scalar'), False),
    (200, 'ringbuf_discard_dynptr', 'void', ('ptr', 'scalar'), False),
    (201, 'dynptr_read', 'scalar', ('uninit_mem', 'size', 'ptr', 'scalar', 'scalar'), False),
    (202, 'dynptr_write', 'scalar', ('ptr', 'scalar', 'mem', 'size', 'scalar'), False),
    (203, 'dynptr_data', 'ptr', ('ptr', 'scalar', 'scalar'), False),
    (204, 'tcp_raw_gen_syncookie_ipv4', 'scalar', ('ptr', 'uninit_mem', 'size'), True),
    (205, 'tcp_raw_gen_syncookie_ipv6', 'scalar', ('ptr', 'uninit_mem', 'size'), True),
    (206, 'tcp_raw_check_syncookie_ipv4', 'scalar', ('ptr', 'ptr'), True),
    (207, 'tcp_raw_check_syncookie_ipv6', 'scalar', ('ptr', 'ptr'), True),
    (208, 'ktime_get_tai_ns', 'scalar', (), False),
    (209, 'user_ringbuf_drain', 'scalar', ('map', 'func', 'ptr', 'scalar'), False),
    (210, 'cgrp_storage_get', 'ptr', ('map', 'ptr', 'map_value', 'scalar'), False),
    (211, 'cgrp_storage_delete', 'scalar', ('map', 'ptr'), False),
))

MAX_HELPER_ID = HELPERS[-1].id
_BY_NAME = {h.name: h for h in HELPERS}


def helper(name_or_id: str | int) -> Helper:
    """Look a helper up by id, by name (``map_lookup_elem``) or by C name
    (``bpf_map_lookup_elem``).  Raises :class:`~pyebpf.errors.UnknownNameError`
    (a ``KeyError``) naming close matches."""
    if isinstance(name_or_id, int):
        if 0 <= name_or_id < len(HELPERS):
            return HELPERS[name_or_id]
        raise UnknownNameError(f"no helper with id {name_or_id} (ids are 0..{MAX_HELPER_ID})")
    name = name_or_id[4:] if name_or_id.startswith("bpf_") else name_or_id
    try:
        return _BY_NAME[name]
    except KeyError:
        close = close_matches(name, _BY_NAME, n=4)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(f"unknown helper {name_or_id!r}{hint}") from None


def helper_name(helper_id: int) -> str | None:
    """The name (without ``bpf_``) of helper ``helper_id``, or None if unknown."""
    if 0 < helper_id < len(HELPERS):
        return HELPERS[helper_id].name
    return None
