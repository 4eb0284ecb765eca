// Program types this kernel loads or refuses: verdicts must match libbpf's.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

__u64 hits = 0;

#if !defined(ONLY) || ONLY == 1
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	hits += prev->pid != next->pid;
	return 0;
}
#endif

#if !defined(ONLY) || ONLY == 2
SEC("iter/task")
int dump_task(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (task)
		BPF_SEQ_PRINTF(ctx->meta->seq, "%d\n", task->pid);
	return 0;
}
#endif

#if !defined(ONLY) || ONLY == 3
SEC("fentry/do_nanosleep")
int BPF_PROG(on_nanosleep_entry)
{
	return 0;
}
#endif

#if !defined(ONLY) || ONLY == 4
SEC("lsm/file_open")
int BPF_PROG(on_file_open, struct file *file)
{
	return 0;
}
#endif

#if !defined(ONLY) || ONLY == 5
SEC("kprobe/do_nanosleep")
int BPF_KPROBE(on_nanosleep)
{
	hits++;
	return 0;
}
#endif

#if !defined(ONLY) || ONLY == 6
SEC("xdp")
int pass_all(struct xdp_md *ctx)
{
	return XDP_PASS;
}
#endif

#if !defined(ONLY) || ONLY == 7
SEC("socket")
int keep_all(struct __sk_buff *skb)
{
	return -1;
}
#endif

#if !defined(ONLY) || ONLY == 8
SEC("perf_event")
int on_sample(void *ctx)
{
	hits++;
	return 0;
}
#endif
