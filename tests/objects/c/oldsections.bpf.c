// Section names written for libbpf 0.x, as older tools and exporters still
// write them: libbpf 1.x takes only the exact names (or "prefix+" forms).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define XDP_PASS 2
#define TC_ACT_OK 0

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

static __always_inline void bump(void)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&seen, &k);
	if (v)
		*v += 1;
}

SEC("xdp")
int xdp_exact(struct xdp_md *ctx)
{
	bump();
	return XDP_PASS;
}

#ifndef EXACT_ONLY
SEC("xdp/filter")
int xdp_named(struct xdp_md *ctx)
{
	bump();
	return XDP_PASS;
}

SEC("classifier/ingress")
int tc_named(struct __sk_buff *skb)
{
	bump();
	return TC_ACT_OK;
}

SEC("perf_event/type=1,config=0,frequency=1,sample_period=49")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	bump();
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
