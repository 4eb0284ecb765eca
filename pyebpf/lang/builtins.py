"""The builtins that are one helper call away (``pid``, ``tid``, ``nsecs``,
``elapsed``, a user stack's key...), emitted into a register by the
language's code generation (:mod:`pyebpf.lang.codegen_ints`)."""
from __future__ import annotations

from ..program import R0, R1, R2, R3, W0, Program, Reg

__all__ = ["BPF_F_USER_STACK", "HELPER_BUILTINS", "emit_helper_builtin", "emit_elapsed",
           "emit_ustack_key"]

BPF_F_USER_STACK = 1 << 8


#: the builtins that are one helper's result (also the bpftrace language's):
#: name -> (helper, which part of its 64-bit result: "high" or "low" half, or "" all)
HELPER_BUILTINS = {
    "pid": ("get_current_pid_tgid", "high"), "tid": ("get_current_pid_tgid", "low"),
    "uid": ("get_current_uid_gid", "low"), "gid": ("get_current_uid_gid", "high"),
    "cpu": ("get_smp_processor_id", ""), "nsecs": ("ktime_get_ns", ""),
    "cgroup": ("get_current_cgroup_id", ""), "rand": ("get_prandom_u32", ""),
}


def emit_helper_builtin(p: Program, name: str, dst: Reg) -> None:
    """``dst = name`` for a name of :data:`HELPER_BUILTINS`; clobbers r0-r5."""
    helper, part = HELPER_BUILTINS[name]
    p.call(helper)
    if part == "high":
        p.rsh(R0, 32)
    elif part == "low":
        p.mov(W0, W0)
    p.mov(dst, R0)


def emit_elapsed(p: Program, dst: Reg, start_ns: int) -> None:
    """``dst = ktime_get_ns() - start_ns`` (the nanoseconds since the start);
    clobbers r0-r5."""
    p.call("ktime_get_ns")
    p.lddw(R1, start_ns)
    p.sub(R0, R1)
    p.mov(dst, R0)


def emit_ustack_key(p: Program, dst: Reg, ctx: Reg, stack_map: object) -> None:
    """``dst = pid << 32 | user stack id`` (the id from ``stack_map``, a
    stack trace map); ``ctx`` holds the program's context; clobbers r0-r5."""
    p.call("get_current_pid_tgid")
    p.rsh(R0, 32)
    p.lsh(R0, 32)
    p.mov(dst, R0)
    p.mov(R1, ctx)
    p.ld_map(R2, stack_map)
    p.mov(R3, BPF_F_USER_STACK)
    p.call("get_stackid")
    p.mov(W0, W0)
    p.or_(dst, R0)
