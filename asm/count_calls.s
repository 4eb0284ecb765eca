# count_calls.s -- count the calls of a function, per process.
#
# Each hit of the uprobe adds 1 to calls[pid] (a hash map from the process
# id to a u64), created at the first call.  The bpftrace equivalent is
#     uprobe:BINARY:FUNC { @calls[pid] = count(); }
#
# pyebpf: description count the calls of FUNC in BINARY, per process id
# pyebpf: param BINARY the program or library to probe (a path, or a name like libc)
# pyebpf: param FUNC the function to count
# pyebpf: map calls hash key=u64 value=u64 entries=10240 show=count
# pyebpf: program count_calls attach=uprobe:${BINARY}:${FUNC}

    call bpf_get_current_pid_tgid
    r0 >>= 32                       # the process id (tgid) is in the upper half
    *(u64 *)(r10 - 8) = r0          # the key, on the stack
    r1 = calls ll
    r2 = r10
    r2 += -8
    call bpf_map_lookup_elem
    if r0 == 0 goto new
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1     # an existing entry: add 1 atomically
    goto out
new:
    *(u64 *)(r10 - 16) = 1          # the first call: insert 1 (BPF_NOEXIST)
    r1 = calls ll
    r2 = r10
    r2 += -8
    r3 = r10
    r3 += -16
    r4 = 1
    call bpf_map_update_elem
    if r0 == 0 goto out
    r1 = calls ll                   # another CPU inserted it meanwhile: add to it
    r2 = r10
    r2 += -8
    call bpf_map_lookup_elem
    if r0 == 0 goto out
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
out:
    r0 = 0
    exit
