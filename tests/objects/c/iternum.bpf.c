// Open-coded iterators, bpf_loop callbacks and optional kfuncs, as recent
// tools write them (kfunc prototypes copied from bpf_experimental.h style
// headers, with unnamed parameters; optional kfuncs declared __weak and
// tested with bpf_ksym_exists before use).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#ifndef bpf_ksym_exists          /* libbpf 1.2's macro; Debian's 1.1 lacks it */
#define bpf_ksym_exists(sym) (!!(sym))
#endif

extern int bpf_iter_num_new(struct bpf_iter_num *, int, int) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *) __ksym;
/* a kfunc no kernel has: optional */
extern void bpf_pyebpf_no_such_kfunc(struct task_struct *, int) __ksym __weak;

#ifdef EMPTY_DATA
/* clang 14 writes this section's DATASEC with size 0 */
__u64 scratch[0] SEC(".data.scratch");
#endif

long loop_sum = 0;
long iter_sum = 0;
int has_optional = -1;

static int add_index(__u32 index, void *ctx)
{
	*(long *)ctx += index;
	return 0;
}

SEC("syscall")
int sum_loop(void *ctx)
{
	long sum = 0;

	bpf_loop(5, add_index, &sum, 0);        /* 0+1+2+3+4 */
	loop_sum = sum;
	return 0;
}

SEC("syscall")
int sum_iter(void *ctx)
{
	struct bpf_iter_num it;
	int *v;
	long sum = 0;

	bpf_iter_num_new(&it, 1, 5);            /* 1+2+3+4 */
	while ((v = bpf_iter_num_next(&it)))
		sum += *v;
	bpf_iter_num_destroy(&it);
	iter_sum = sum;
	return 0;
}

SEC("syscall")
int optional_kfunc(void *ctx)
{
	has_optional = bpf_ksym_exists(bpf_pyebpf_no_such_kfunc);
	if (bpf_ksym_exists(bpf_pyebpf_no_such_kfunc))
		bpf_pyebpf_no_such_kfunc(0, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
