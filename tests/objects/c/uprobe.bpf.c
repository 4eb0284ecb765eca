// A uprobe tool: counts calls of a function in a gcc-built target and sums an argument.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

__u64 calls = 0;
__u64 total = 0;
__u64 last_ret = 0;

SEC("uprobe")
int BPF_KPROBE(on_add, int a, int b)
{
	__sync_fetch_and_add(&calls, 1);
	__sync_fetch_and_add(&total, a + b);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_add_ret, int ret)
{
	last_ret = ret;
	return 0;
}
