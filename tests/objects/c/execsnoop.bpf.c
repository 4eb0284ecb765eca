// An execsnoop-like tool written for pyebpf's tests: tracepoint + CO-RE + ring buffer
// + const volatile filter + a bpf-to-bpf call.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

const volatile pid_t targ_tgid = 0;     /* 0: every process */
const volatile unsigned int marker = 0;

struct event {
	__u32 pid;
	__u32 ppid;
	__u32 marker;
	__u32 calls;
	char comm[16];
	char filename[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

__u64 seen = 0;        /* .bss */
__u32 calls = 7;       /* .data */

static __noinline __u32 parent_tgid(struct task_struct *task)
{
	return BPF_CORE_READ(task, real_parent, tgid);
}

SEC("tracepoint/syscalls/sys_enter_execve")
int handle_execve(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	pid_t tgid = id >> 32;
	struct event *e;

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	__sync_fetch_and_add(&seen, 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = tgid;
	e->ppid = parent_tgid((struct task_struct *)bpf_get_current_task());
	e->marker = marker;
	e->calls = calls++;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_user_str(e->filename, sizeof(e->filename), (const char *)ctx->args[0]);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
