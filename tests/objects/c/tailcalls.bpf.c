// Tail-call dispatch as Cilium-style datapaths write it: a prog array filled
// in C by its initializer, entries for programs of the same object.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TC_ACT_OK 0

int tail_a(struct __sk_buff *skb);
int tail_b(struct __sk_buff *skb);
int tail_c(struct __sk_buff *skb);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int (struct __sk_buff *));
} dispatch_calls SEC(".maps") = {
	.values = {
		[0] = (void *)&tail_a,
		[2] = (void *)&tail_b,
		[3] = (void *)&tail_c,
	},
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void count(void)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&hits, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("tc")
int tail_a(struct __sk_buff *skb)
{
	count();
	return 10;
}

SEC("tc")
int tail_b(struct __sk_buff *skb)
{
	count();
	return 20;
}

SEC("tc")
int tail_c(struct __sk_buff *skb)
{
#ifdef REJECT_C
	char buf[8] = {};
	return buf[skb->len & 0xff];        /* unbounded stack read: rejected */
#else
	count();
	return 30;
#endif
}

SEC("tc")
int dispatch(struct __sk_buff *skb)
{
	__u32 slot = skb->mark;

	bpf_tail_call(skb, &dispatch_calls, slot);
	return 99;                          /* empty slot: fall through */
}

char LICENSE[] SEC("license") = "GPL";
