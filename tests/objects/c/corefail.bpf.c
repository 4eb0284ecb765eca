// A CO-RE read of a field the kernel's task_struct lacks: the loader poisons
// the instruction, the verifier refuses the invalid call, and the rejection
// must say which relocation found nothing.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct task_struct___missing {
	int pyebpf_no_such_field;
} __attribute__((preserve_access_index));

SEC("tracepoint/syscalls/sys_enter_getpid")
int read_missing(void *ctx)
{
	struct task_struct___missing *task = (void *)bpf_get_current_task();

	return BPF_CORE_READ(task, pyebpf_no_such_field);
}
