"""Program types from section names, as libbpf maps them (``SEC("...")``).

:func:`section_def` gives the :class:`SectionDef` of a section name: the
program type, the expected attach type, what the part after the prefix
names (a tracepoint, a function, a binary and symbol...) and whether the
attach target must be found in the kernel's BTF (tp_btf, fentry, lsm, iter).

Matching is lenient by default, as libbpf 0.x's was: a prefix without ``/``
also takes ``PREFIX/anything`` (``xdp/filter``, ``classifier/ingress``,
``perf_event/type=1,config=0``, as older tools and exporters write them).
libbpf 1.x refuses those: a prefix of its table takes only the exact name,
or ``PREFIX/...`` where libbpf writes the entry ``PREFIX+`` (uprobe, usdt...).
:func:`section_match` says which (``lenient`` is True when only the 0.x
rules take the name); ``section_def(name, strict=True)`` matches as libbpf
1.x does (``open_object(..., strict_sections=True)``, ``pyebpf object
--strict-sections``).
"""
from __future__ import annotations

from ..kernel.constants import AttachType as A, ProgType as P

__all__ = ["SectionDef", "section_def", "section_match", "SECTIONS"]


class SectionDef:
    """``prefix`` (``"tracepoint"``), ``prog_type``, ``attach_type``,
    ``kind`` (the short type name shown to users), ``btf_prefix`` (the kernel
    BTF name the target is looked up as: ``btf_trace_``, ``bpf_lsm_``,
    ``bpf_iter_``, ``""`` for a function; None when no BTF target),
    ``sleepable``; ``plus``: libbpf 1.x takes ``PREFIX/...`` too (its table
    writes ``PREFIX+``), for a prefix that does not end in ``/``."""

    __slots__ = ("prefix", "prog_type", "attach_type", "kind", "btf_prefix", "sleepable",
                 "plus")

    def __init__(self, prefix: str, prog_type: int, attach_type: int, kind: str,
                 btf_prefix: str | None = None, sleepable: bool = False,
                 plus: bool = False) -> None:
        self.prefix, self.prog_type, self.attach_type, self.kind = (prefix, prog_type,
                                                                    attach_type, kind)
        self.btf_prefix = btf_prefix
        self.sleepable = sleepable
        self.plus = plus


#: the prefixes without "/" that libbpf 1.x writes "PREFIX+" (a target may follow)
_PLUS = frozenset(("uprobe", "uprobe.s", "uretprobe", "uretprobe.s", "uprobe.multi",
                   "uretprobe.multi", "usdt"))


def _d(prefix: str, pt: int, at: int, kind: str, btf: str | None = None,
       sleepable: bool = False) -> SectionDef:
    return SectionDef(prefix, int(pt), int(at), kind, btf, sleepable, prefix in _PLUS)


# (duplicates: deliberate, one row a section prefix: a table whose rows are alike by shape)
#: (prefix, definition), longest-prefix match; a prefix ending in "/" needs a target
SECTIONS: tuple[SectionDef, ...] = (
    _d("socket", P.SOCKET_FILTER, 0, "socket"),
    _d("kprobe/", P.KPROBE, 0, "kprobe"),
    _d("kretprobe/", P.KPROBE, 0, "kretprobe"),
    _d("ksyscall/", P.KPROBE, 0, "kprobe"),
    _d("kretsyscall/", P.KPROBE, 0, "kretprobe"),
    _d("uprobe", P.KPROBE, 0, "uprobe"),
    _d("uprobe.s", P.KPROBE, 0, "uprobe", sleepable=True),
    _d("uretprobe", P.KPROBE, 0, "uretprobe"),
    _d("uretprobe.s", P.KPROBE, 0, "uretprobe", sleepable=True),
    _d("kprobe.multi/", P.KPROBE, A.TRACE_KPROBE_MULTI, "kprobe_multi"),
    _d("kretprobe.multi/", P.KPROBE, A.TRACE_KPROBE_MULTI, "kretprobe_multi"),
    _d("uprobe.multi", P.KPROBE, A.TRACE_UPROBE_MULTI, "uprobe_multi"),
    _d("uretprobe.multi", P.KPROBE, A.TRACE_UPROBE_MULTI, "uretprobe_multi"),
    _d("usdt", P.KPROBE, 0, "usdt"),
    _d("tc", P.SCHED_CLS, 0, "tc"),
    _d("classifier", P.SCHED_CLS, 0, "tc"),
    _d("tcx/ingress", P.SCHED_CLS, A.TCX_INGRESS, "tcx"),
    _d("tcx/egress", P.SCHED_CLS, A.TCX_EGRESS, "tcx"),
    _d("action", P.SCHED_ACT, 0, "action"),
    _d("tracepoint/", P.TRACEPOINT, 0, "tracepoint"),
    _d("tp/", P.TRACEPOINT, 0, "tracepoint"),
    _d("raw_tracepoint/", P.RAW_TRACEPOINT, 0, "raw_tracepoint"),
    _d("raw_tp/", P.RAW_TRACEPOINT, 0, "raw_tracepoint"),
    _d("raw_tracepoint.w/", P.RAW_TRACEPOINT_WRITABLE, 0, "raw_tracepoint"),
    _d("raw_tp.w/", P.RAW_TRACEPOINT_WRITABLE, 0, "raw_tracepoint"),
    _d("tp_btf/", P.TRACING, A.TRACE_RAW_TP, "tp_btf", "btf_trace_"),
    _d("fentry/", P.TRACING, A.TRACE_FENTRY, "fentry", ""),
    _d("fmod_ret/", P.TRACING, A.MODIFY_RETURN, "fmod_ret", ""),
    _d("fexit/", P.TRACING, A.TRACE_FEXIT, "fexit", ""),
    _d("fentry.s/", P.TRACING, A.TRACE_FENTRY, "fentry", "", True),
    _d("fexit.s/", P.TRACING, A.TRACE_FEXIT, "fexit", "", True),
    _d("freplace/", P.EXT, 0, "freplace"),
    _d("lsm/", P.LSM, A.LSM_MAC, "lsm", "bpf_lsm_"),
    _d("lsm.s/", P.LSM, A.LSM_MAC, "lsm", "bpf_lsm_", True),
    _d("lsm_cgroup/", P.LSM, A.LSM_CGROUP, "lsm_cgroup", "bpf_lsm_"),
    _d("iter/", P.TRACING, A.TRACE_ITER, "iter", "bpf_iter_"),
    _d("iter.s/", P.TRACING, A.TRACE_ITER, "iter", "bpf_iter_", True),
    _d("syscall", P.SYSCALL, 0, "syscall", sleepable=True),
    _d("xdp", P.XDP, A.XDP, "xdp"),
    _d("xdp.frags", P.XDP, A.XDP, "xdp"),
    _d("perf_event", P.PERF_EVENT, 0, "perf_event"),
    _d("lwt_in", P.LWT_IN, 0, "lwt_in"),
    _d("lwt_out", P.LWT_OUT, 0, "lwt_out"),
    _d("lwt_xmit", P.LWT_XMIT, 0, "lwt_xmit"),
    _d("sockops", P.SOCK_OPS, A.CGROUP_SOCK_OPS, "sockops"),
    _d("sk_skb/stream_parser", P.SK_SKB, A.SK_SKB_STREAM_PARSER, "sk_skb"),
    _d("sk_skb/stream_verdict", P.SK_SKB, A.SK_SKB_STREAM_VERDICT, "sk_skb"),
    _d("sk_skb", P.SK_SKB, 0, "sk_skb"),
    _d("sk_msg", P.SK_MSG, A.SK_MSG_VERDICT, "sk_msg"),
    _d("flow_dissector", P.FLOW_DISSECTOR, A.FLOW_DISSECTOR, "flow_dissector"),
    _d("cgroup_skb/ingress", P.CGROUP_SKB, A.CGROUP_INET_INGRESS, "cgroup_skb"),
    _d("cgroup_skb/egress", P.CGROUP_SKB, A.CGROUP_INET_EGRESS, "cgroup_skb"),
    _d("cgroup/skb", P.CGROUP_SKB, 0, "cgroup_skb"),
    _d("cgroup/sock_create", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE, "cgroup_sock"),
    _d("cgroup/sock_release", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_RELEASE, "cgroup_sock"),
    _d("cgroup/sock", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE, "cgroup_sock"),
    _d("cgroup/dev", P.CGROUP_DEVICE, A.CGROUP_DEVICE, "cgroup_device"),
    _d("cgroup/sysctl", P.CGROUP_SYSCTL, A.CGROUP_SYSCTL, "cgroup_sysctl"),
    _d("cgroup/getsockopt", P.CGROUP_SOCKOPT, A.CGROUP_GETSOCKOPT, "cgroup_sockopt"),
    _d("cgroup/setsockopt", P.CGROUP_SOCKOPT, A.CGROUP_SETSOCKOPT, "cgroup_sockopt"),
    _d("cgroup/connect4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_CONNECT, "cgroup_sock_addr"),
    _d("cgroup/connect6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_CONNECT, "cgroup_sock_addr"),
    _d("cgroup/bind4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_BIND, "cgroup_sock_addr"),
    _d("cgroup/bind6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_BIND, "cgroup_sock_addr"),
    _d("sk_lookup", P.SK_LOOKUP, A.SK_LOOKUP, "sk_lookup"),
    _d("netfilter", P.NETFILTER, A.NETFILTER, "netfilter"),
    _d("struct_ops/", P.STRUCT_OPS, 0, "struct_ops"),
    _d("struct_ops.s/", P.STRUCT_OPS, 0, "struct_ops", sleepable=True),
)


def section_match(section: str) -> tuple[SectionDef | None, bool]:
    """The definition whose prefix matches ``section`` (an exact name, or a
    prefix followed by ``/`` or ``+``; the longest), and whether only libbpf
    0.x's lenient rules take that name (libbpf 1.x refuses it); ``(None,
    False)`` for a section libbpf does not know."""
    best: SectionDef | None = None
    for d in SECTIONS:
        p = d.prefix
        if p.endswith("/"):
            ok = section.startswith(p)
        else:
            ok = section == p or section.startswith(p + "/") or section.startswith(p + "+")
        if ok and (best is None or len(p) > len(best.prefix)):
            best = d
    if best is None:
        return None, False
    p = best.prefix
    strict_ok = p.endswith("/") or section == p or (best.plus and section.startswith(p + "/"))
    return best, not strict_ok


def section_def(section: str, strict: bool = False) -> SectionDef | None:
    """The definition of ``section`` (see :func:`section_match`); with
    ``strict``, None for a name only libbpf 0.x's rules take, as libbpf 1.x."""
    sdef, lenient = section_match(section)
    return None if strict and lenient else sdef
