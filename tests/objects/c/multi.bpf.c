// Several programs per section, perf buffer, hash and array maps, map-in-map,
// .rodata.* / .data.* sections, function pointers (bpf_loop callback), externs.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

extern int LINUX_KERNEL_VERSION __kconfig;
extern int CONFIG_HZ __kconfig __weak;
extern const void _stext __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} pb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner);
} outer SEC(".maps") = {
	.values = { [0] = 0 },
};

/* pinned as /sys/fs/bpf/PINNED: the tests give each run its own name */
#ifndef PINNED
#define PINNED pinned_counts
#endif
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} PINNED SEC(".maps");

const volatile __u64 scale SEC(".rodata.cfg") = 3;
__u64 extra SEC(".data.stats") = 5;
__u64 kver = 0;
__u64 hz = 0;
__u64 fops = 0;
__u32 loops = 0;

struct pb_sample { __u32 tag; __u32 pid; __u64 value; };

static long add_one(__u32 index, void *ctx)
{
	__u64 *v = ctx;
	*v += 1;
	return 0;
}

static __noinline int bump(__u32 key, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &key);
	if (v) {
		__sync_fetch_and_add(v, by);
		return 1;
	}
	bpf_map_update_elem(&counts, &key, &by, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int first(void *ctx)
{
	struct pb_sample s = { .tag = 1, .pid = bpf_get_current_pid_tgid() >> 32, .value = scale };
	bump(1, scale);
	kver = LINUX_KERNEL_VERSION;
	hz = CONFIG_HZ;
	fops = (__u64)&_stext;
	bpf_perf_event_output(ctx, &pb, BPF_F_CURRENT_CPU, &s, sizeof(s));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int second(void *ctx)
{
	__u64 n = 0;
	bpf_loop(10, add_one, &n, 0);
	loops = n;
	extra += bump(2, 1);
	return 0;
}

SEC("raw_tp/sys_enter")
int raw_one(void *ctx)
{
	return bump(3, 1) * 0;
}
