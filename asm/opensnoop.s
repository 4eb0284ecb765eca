# opensnoop.s -- print every openat(2): process, flags and path.
#
# A tracepoint program on syscalls:sys_enter_openat.  Its context is the
# tracepoint's record; ${args.NAME} is replaced by the offset of field NAME
# in it (see /sys/kernel/tracing/events/syscalls/sys_enter_openat/format).
# The path is in user memory: bpf_probe_read_user_str copies it.
# With -p PID or -c CMD only that process is shown (${PID}; 0 = all).
# The bpftrace equivalent is
#     tracepoint:syscalls:sys_enter_openat {
#         printf("%-7d %-8x %-16s %s\n", pid, args->flags, comm, str(args->filename)); }
#
# pyebpf: description print each openat(2): pid, comm, flags and the path
# pyebpf: map events perf_event_array
# pyebpf: output events fields=pid:u32,flags:u32,comm:char[16],filename:char[128] format="%-7d %-8x %-16s %s"
# pyebpf: program opensnoop attach=tracepoint:syscalls:sys_enter_openat

    r6 = r1                          # the context (helpers clobber r1-r5)
    call bpf_get_current_pid_tgid
    r7 = r0
    r7 >>= 32                        # the process id
    r1 = ${PID}
    if r1 == 0 goto keep
    if r7 != r1 goto out
keep:
    # the event: struct { u32 pid; u32 flags; char comm[16]; char filename[128]; }
    # at r10 - 152, zeroed first (the strings do not fill their buffers)
    r1 = 0
    *(u64 *)(r10 - 152) = r1
    *(u64 *)(r10 - 144) = r1
    *(u64 *)(r10 - 136) = r1
    *(u64 *)(r10 - 128) = r1
    *(u64 *)(r10 - 120) = r1
    *(u64 *)(r10 - 112) = r1
    *(u64 *)(r10 - 104) = r1
    *(u64 *)(r10 - 96) = r1
    *(u64 *)(r10 - 88) = r1
    *(u64 *)(r10 - 80) = r1
    *(u64 *)(r10 - 72) = r1
    *(u64 *)(r10 - 64) = r1
    *(u64 *)(r10 - 56) = r1
    *(u64 *)(r10 - 48) = r1
    *(u64 *)(r10 - 40) = r1
    *(u64 *)(r10 - 32) = r1
    *(u64 *)(r10 - 24) = r1
    *(u64 *)(r10 - 16) = r1
    *(u64 *)(r10 - 8) = r1
    *(u32 *)(r10 - 152) = r7         # pid
    r1 = *(u64 *)(r6 + ${args.flags})
    *(u32 *)(r10 - 148) = r1         # flags
    r1 = r10
    r1 += -144
    r2 = 16
    call bpf_get_current_comm        # comm
    r1 = r10
    r1 += -128
    r2 = 128
    r3 = *(u64 *)(r6 + ${args.filename})
    call bpf_probe_read_user_str     # filename
    r1 = r6
    r2 = events ll
    w3 = -1                          # BPF_F_CURRENT_CPU (0xffffffff, zero-extended)
    r4 = r10
    r4 += -152
    r5 = 152
    call bpf_perf_event_output
out:
    r0 = 0
    exit
