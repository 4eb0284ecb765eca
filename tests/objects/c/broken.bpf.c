// A program the verifier rejects: reads past a map value (the C line must be named).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} vals SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int bad_read(void *ctx)
{
	__u32 key = 0;
	__u64 *v = bpf_map_lookup_elem(&vals, &key);
	return *v;      /* no NULL check */
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int good(void *ctx)
{
	return 0;
}
