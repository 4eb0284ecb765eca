# execsnoop.s -- print every execve(2): who runs what (the path and argv[1]).
#
# A tracepoint program on syscalls:sys_enter_execve.  comm is still the name
# of the program that calls execve (the new one has not started yet).
# argv[1] takes two reads: the pointer argv[1] (8 bytes at argv + 8), then the
# string it points to.  With -p PID or -c CMD only that process is shown.
# The bpftrace equivalent is
#     tracepoint:syscalls:sys_enter_execve {
#         printf("%-7d %-16s %s %s\n", pid, comm, str(args->filename), str(args->argv[1])); }
#
# pyebpf: description print each execve(2): pid, the caller's comm, the path and argv[1]
# pyebpf: map events perf_event_array
# pyebpf: output events fields=pid:u32,uid:u32,comm:char[16],filename:char[128],arg1:char[64] format="%-7d %-6d %-16s %s %s"
# pyebpf: program execsnoop attach=tracepoint:syscalls:sys_enter_execve

    r6 = r1
    call bpf_get_current_pid_tgid
    r7 = r0
    r7 >>= 32
    r1 = ${PID}
    if r1 == 0 goto keep
    if r7 != r1 goto out
keep:
    # struct { u32 pid; u32 uid; char comm[16]; char filename[128]; char arg1[64]; }
    # at r10 - 216, zeroed first
    r1 = 0
    r2 = r10
    r2 += -216
    *(u64 *)(r2 + 0) = r1
    *(u64 *)(r2 + 8) = r1
    *(u64 *)(r2 + 16) = r1
    *(u64 *)(r2 + 24) = r1
    *(u64 *)(r2 + 32) = r1
    *(u64 *)(r2 + 40) = r1
    *(u64 *)(r2 + 48) = r1
    *(u64 *)(r2 + 56) = r1
    *(u64 *)(r2 + 64) = r1
    *(u64 *)(r2 + 72) = r1
    *(u64 *)(r2 + 80) = r1
    *(u64 *)(r2 + 88) = r1
    *(u64 *)(r2 + 96) = r1
    *(u64 *)(r2 + 104) = r1
    *(u64 *)(r2 + 112) = r1
    *(u64 *)(r2 + 120) = r1
    *(u64 *)(r2 + 128) = r1
    *(u64 *)(r2 + 136) = r1
    *(u64 *)(r2 + 144) = r1
    *(u64 *)(r2 + 152) = r1
    *(u64 *)(r2 + 160) = r1
    *(u64 *)(r2 + 168) = r1
    *(u64 *)(r2 + 176) = r1
    *(u64 *)(r2 + 184) = r1
    *(u64 *)(r2 + 192) = r1
    *(u64 *)(r2 + 200) = r1
    *(u64 *)(r2 + 208) = r1
    *(u32 *)(r10 - 216) = r7         # pid
    call bpf_get_current_uid_gid
    *(u32 *)(r10 - 212) = r0         # uid (the low half)
    r1 = r10
    r1 += -208
    r2 = 16
    call bpf_get_current_comm        # comm
    r1 = r10
    r1 += -192
    r2 = 128
    r3 = *(u64 *)(r6 + ${args.filename})
    call bpf_probe_read_user_str     # filename
    r1 = r10                         # argv[1]: first the pointer ...
    r1 += -64
    r2 = 8
    r3 = *(u64 *)(r6 + ${args.argv})
    r3 += 8
    call bpf_probe_read_user
    r3 = *(u64 *)(r10 - 64)
    r1 = 0
    *(u64 *)(r10 - 64) = r1          # clear the slot again: the string goes there
    if r3 == 0 goto send
    r1 = r10                         # ... then the string
    r1 += -64
    r2 = 64
    call bpf_probe_read_user_str
send:
    r1 = r6
    r2 = events ll
    w3 = -1                          # BPF_F_CURRENT_CPU
    r4 = r10
    r4 += -216
    r5 = 216
    call bpf_perf_event_output
out:
    r0 = 0
    exit
