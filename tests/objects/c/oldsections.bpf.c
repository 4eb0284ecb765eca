// Section names written for libbpf 0.x, as older tools and exporters still
// write them: libbpf 1.x takes only the exact names (or "prefix+" forms).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define XDP_PASS 2
#define TC_ACT_OK 0

/* programs that do next to nothing: only their section names matter here */
static volatile __u64 seen;

SEC("xdp")
int xdp_exact(struct xdp_md *ctx)
{
	seen++;
	return XDP_PASS;
}

#ifndef EXACT_ONLY
SEC("xdp/filter")
int xdp_named(struct xdp_md *ctx)
{
	seen++;
	return XDP_PASS;
}

SEC("classifier/ingress")
int tc_named(struct __sk_buff *skb)
{
	seen++;
	return TC_ACT_OK;
}

SEC("perf_event/type=1,config=0,frequency=1,sample_period=49")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	seen++;
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
