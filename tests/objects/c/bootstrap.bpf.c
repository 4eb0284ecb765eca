// A bootstrap-like tool written for pyebpf's tests: process lifetimes from the
// sched tracepoints, exec times in a hash map, CO-RE reads of the task, the
// exec'd file from the tracepoint's __data_loc field, events through a ring
// buffer and a const volatile minimum duration.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 min_duration_ns = 0;

struct life_event {
	__u32 pid;
	__u32 ppid;
	__u32 exit_code;
	__u8 is_exit;
	__u8 pad[3];
	__u64 duration_ns;
	char comm[16];
	char filename[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, pid_t);
	__type(value, __u64);
} started SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} lives SEC(".maps");

SEC("tp/sched/sched_process_exec")
int on_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	pid_t pid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns();
	unsigned int off = ctx->__data_loc_filename & 0xFFFF;
	struct life_event *e;

	bpf_map_update_elem(&started, &pid, &now, BPF_ANY);
	e = bpf_ringbuf_reserve(&lives, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = pid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = 0;
	e->is_exit = 0;
	e->duration_ns = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_str(e->filename, sizeof(e->filename), (void *)ctx + off);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp/sched/sched_process_exit")
int on_exit(struct trace_event_raw_sched_process_template *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	pid_t pid = id >> 32;
	__u64 *start, duration = 0;
	struct life_event *e;

	if (pid != (__u32)id)           /* a thread, not the whole process */
		return 0;
	start = bpf_map_lookup_elem(&started, &pid);
	if (start)
		duration = bpf_ktime_get_ns() - *start;
	else if (min_duration_ns)
		return 0;
	bpf_map_delete_elem(&started, &pid);
	if (min_duration_ns && duration < min_duration_ns)
		return 0;
	e = bpf_ringbuf_reserve(&lives, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = pid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = (BPF_CORE_READ(task, exit_code) >> 8) & 0xff;
	e->is_exit = 1;
	e->duration_ns = duration;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->filename[0] = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
