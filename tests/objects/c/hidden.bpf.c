// A global function hidden from other objects (__hidden, as library headers
// declare their helpers): libbpf loads it as a static subprogram, verified
// in its caller's context, so writing through its pointer argument (which
// the caller passes a stack slot for) is accepted; verified on its own, as
// a global function, the pointer might be NULL and the write is refused.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

__u64 seen;

__weak __hidden int fill_answer(__u64 which, long *out)
{
	*out = 0;
	if (which > 7)
		return -1;
	*out = which * 6;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int hidden_caller(void *ctx)
{
	long answer = 0;

	if (fill_answer(bpf_get_prandom_u32() & 15, &answer) == 0)
		__sync_fetch_and_add(&seen, answer);
	return 0;
}
