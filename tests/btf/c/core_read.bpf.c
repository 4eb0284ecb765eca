/* CO-RE relocations of every kind, in the style of libbpf-tools: read
 * through bpf_core_read.h against a vmlinux.h made from the kernel's BTF. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* a flavor: the kernel's task_struct under another name, with a field that
 * the running kernel no longer has (state became __state in 5.14) */
struct task_struct___old {
	long state;
	int pid;
} __attribute__((preserve_access_index));

/* a type this kernel does not have */
struct pyebpf_no_such_type {
	int x;
} __attribute__((preserve_access_index));

/* list_head under a flavor (clang 14 has no type_matches; its tests build BTF) */
struct list_head___mine {
	struct list_head *next;
	struct list_head *prev;
} __attribute__((preserve_access_index));

__u64 out[32];

SEC("tp/sched/sched_process_exec")
int core_read(void *ctx)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	struct task_struct___old *old = (void *)t;
	struct sk_buff *skb = 0;
	char c = 0;

	out[0] = BPF_CORE_READ(t, pid);
	out[1] = BPF_CORE_READ(t, real_parent, tgid);
	bpf_core_read(&c, 1, &t->comm[3]);
	out[2] = c;
	out[3] = BPF_CORE_READ(t, start_time);
	out[4] = bpf_core_field_exists(t->pid);
	out[5] = bpf_core_field_exists(old->state);
	out[6] = bpf_core_field_size(t->comm);
	out[7] = bpf_core_type_id_kernel(struct task_struct);
	out[8] = bpf_core_type_id_local(struct task_struct);
	out[9] = bpf_core_type_exists(struct pyebpf_no_such_type);
	out[10] = bpf_core_type_size(struct task_struct);
	out[11] = bpf_core_type_size(struct list_head___mine);
	out[12] = bpf_core_enum_value_exists(enum pid_type, PIDTYPE_SID);
	out[13] = bpf_core_enum_value(enum pid_type, PIDTYPE_SID);
	out[14] = BPF_CORE_READ_BITFIELD_PROBED(t, sched_reset_on_fork);
	out[15] = bpf_core_field_offset(skb->mark);
	out[16] = bpf_core_field_offset(t->se.vruntime);
	out[17] = bpf_core_type_exists(struct task_struct___old);
	out[18] = BPF_CORE_READ(old, pid);
	out[19] = __builtin_preserve_field_info(t->pid, BPF_FIELD_SIGNED);
	out[20] = __builtin_preserve_field_info(t->start_time, BPF_FIELD_SIGNED);
	if (bpf_core_field_exists(old->state))
		out[21] = BPF_CORE_READ(old, state);   /* poisoned, never reached */
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
