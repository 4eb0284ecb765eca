# usdt_args.s -- the arguments of a USDT probe, as events.
#
# USDT probes (sys/sdt.h) describe where each argument is at the probe site
# (a register, a stack slot, a constant...) in the ELF note of the probe;
# '.arg rD, N, rCTX' expands to the instructions that read argument N from
# there into rD (rCTX holds the context: pt_regs).  The default probe is the
# one of tests/trace/workload.c: DTRACE_PROBE3(pyebpf_test, tick, i, i % 10, name).
# The bpftrace equivalent is
#     usdt:BINARY:pyebpf_test:tick { printf("%d %d %s\n", arg0, arg1, str(arg2)); }
#
# pyebpf: description the first three arguments of a USDT probe (two integers and a string), as events
# pyebpf: param BINARY the program or library holding the probe
# pyebpf: param PROBE=pyebpf_test:tick the probe, as PROVIDER:NAME
# pyebpf: map events perf_event_array
# pyebpf: output events fields=arg0:s64,arg1:s64,arg2:char[32] format="%d %d %s"
# pyebpf: program usdt_args attach=usdt:${BINARY}:${PROBE}

    r6 = r1                          # pt_regs
    .arg r7, 0, r6
    *(u64 *)(r10 - 48) = r7          # struct { s64 arg0; s64 arg1; char arg2[32]; } at r10 - 48
    .arg r7, 1, r6
    *(u64 *)(r10 - 40) = r7
    .arg r7, 2, r6                   # a pointer to the string
    r1 = 0
    *(u64 *)(r10 - 32) = r1
    *(u64 *)(r10 - 24) = r1
    *(u64 *)(r10 - 16) = r1
    *(u64 *)(r10 - 8) = r1
    r1 = r10
    r1 += -32
    r2 = 32
    r3 = r7
    call bpf_probe_read_user_str
    r1 = r6
    r2 = events ll
    w3 = -1                          # BPF_F_CURRENT_CPU
    r4 = r10
    r4 += -48
    r5 = 48
    call bpf_perf_event_output
    r0 = 0
    exit
