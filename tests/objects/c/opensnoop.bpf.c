// An opensnoop-like tool written for pyebpf's tests: a syscall's enter and exit
// tracepoints paired through a hash map keyed by thread id, events through a
// perf event array, and a const volatile process filter.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

const volatile pid_t targ_pid = 0;      /* 0: every process */

struct pending {
	const char *path;
	__s32 flags;
};

struct event {
	__u32 pid;
	__u32 tid;
	__s32 ret;
	__s32 flags;
	char comm[16];
	char path[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pending);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} opens SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_openat")
int on_openat_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct pending p = {};

	if (targ_pid && (id >> 32) != targ_pid)
		return 0;
	p.path = (const char *)ctx->args[1];
	p.flags = (__s32)ctx->args[2];
	bpf_map_update_elem(&inflight, &tid, &p, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int on_openat_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct pending *p;
	struct event e = {};

	p = bpf_map_lookup_elem(&inflight, &tid);
	if (!p)
		return 0;
	e.pid = id >> 32;
	e.tid = tid;
	e.ret = (__s32)ctx->ret;
	e.flags = p->flags;
	bpf_get_current_comm(e.comm, sizeof(e.comm));
	bpf_probe_read_user_str(e.path, sizeof(e.path), p->path);
	bpf_perf_event_output(ctx, &opens, BPF_F_CURRENT_CPU, &e, sizeof(e));
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}
