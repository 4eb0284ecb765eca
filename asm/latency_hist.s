# latency_hist.s -- a histogram of a function's latency, in microseconds.
#
# Two programs: at the function's entry (uprobe) the time is saved under the
# thread's id; at its return (uretprobe) the saved time is taken back, the
# latency computed, and the log2 bucket of it counted in a per-CPU array
# (no atomic needed: each CPU has its own copy; 'pyebpf run' adds them up).
# The bpftrace equivalent is
#     uprobe:BINARY:FUNC { @start[tid] = nsecs; }
#     uretprobe:BINARY:FUNC /@start[tid]/ {
#         @usecs = hist((nsecs - @start[tid]) / 1000); delete(@start[tid]); }
#
# Buckets as bpftrace's hist(): 0 holds negative values, 1 holds 0, and
# k >= 2 holds [2^(k-2), 2^(k-1)).
#
# pyebpf: description a log2 histogram of FUNC's latency in microseconds
# pyebpf: param BINARY the program or library to probe
# pyebpf: param FUNC the function to time
# pyebpf: map start hash key=u64 value=u64 entries=10240
# pyebpf: map usecs percpu_array value=u64 entries=66 show=hist

# pyebpf: program entry attach=uprobe:${BINARY}:${FUNC}
    call bpf_get_current_pid_tgid
    *(u64 *)(r10 - 8) = r0          # key: the thread (pid_tgid)
    call bpf_ktime_get_ns
    *(u64 *)(r10 - 16) = r0         # value: now
    r1 = start ll
    r2 = r10
    r2 += -8
    r3 = r10
    r3 += -16
    r4 = 0                          # BPF_ANY
    call bpf_map_update_elem
    r0 = 0
    exit

# pyebpf: program return attach=uretprobe:${BINARY}:${FUNC}
    call bpf_get_current_pid_tgid
    *(u64 *)(r10 - 8) = r0
    r1 = start ll
    r2 = r10
    r2 += -8
    call bpf_map_lookup_elem
    if r0 == 0 goto out             # entered before we attached: skip
    r6 = *(u64 *)(r0 + 0)           # the entry time
    r1 = start ll
    r2 = r10
    r2 += -8
    call bpf_map_delete_elem
    call bpf_ktime_get_ns
    r0 -= r6
    r0 /= 1000                      # r0 = latency in microseconds
    # r1 = log2 bucket of r0 (a binary search for the highest set bit)
    r1 = 1
    if r0 == 0 goto bucket
    r1 = 2
    r2 = r0
    r2 >>= 32
    if r2 == 0 goto b16
    r0 = r2
    r1 += 32
b16:
    r2 = r0
    r2 >>= 16
    if r2 == 0 goto b8
    r0 = r2
    r1 += 16
b8:
    r2 = r0
    r2 >>= 8
    if r2 == 0 goto b4
    r0 = r2
    r1 += 8
b4:
    r2 = r0
    r2 >>= 4
    if r2 == 0 goto b2
    r0 = r2
    r1 += 4
b2:
    r2 = r0
    r2 >>= 2
    if r2 == 0 goto b1
    r0 = r2
    r1 += 2
b1:
    r2 = r0
    r2 >>= 1
    if r2 == 0 goto bucket
    r1 += 1
bucket:
    *(u32 *)(r10 - 12) = r1         # key: the bucket
    r1 = usecs ll
    r2 = r10
    r2 += -12
    call bpf_map_lookup_elem
    if r0 == 0 goto out
    r1 = *(u64 *)(r0 + 0)           # this CPU's count: no other CPU writes it
    r1 += 1
    *(u64 *)(r0 + 0) = r1
out:
    r0 = 0
    exit
