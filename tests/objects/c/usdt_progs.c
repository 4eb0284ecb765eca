// USDT through libbpf's usdt.bpf.h, as C tools write it: a generic program
// that reports every argument (bpf_usdt_arg_cnt, bpf_usdt_arg, bpf_usdt_cookie)
// through a ring buffer, and CPython's function__entry read with BPF_USDT.
// Built with -DTARGET=\"PATH\", it holds instead programs whose sections name
// their probes in that target (usdt/PATH:tgt:NAME), for attach_all().
// (Not named *.bpf.c: usdt.bpf.h includes <linux/errno.h>, which needs the
// multiarch include directory; test_objects_usdt.py builds it with that.)
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "GPL";

#define MAX_ARGS 12

struct args_event {
	__u32 pid;
	__s32 arg_cnt;
	__u64 cookie;
	__u32 tag;
	__s32 rets[MAX_ARGS];
	long args[MAX_ARGS];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline int report(struct pt_regs *ctx, __u32 tag)
{
	struct args_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->tag = tag;
	e->arg_cnt = bpf_usdt_arg_cnt(ctx);
	e->cookie = bpf_usdt_cookie(ctx);
	for (int i = 0; i < MAX_ARGS; i++) {
		long v = 0;

		e->rets[i] = bpf_usdt_arg(ctx, i, &v);
		e->args[i] = v;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#ifdef TARGET

SEC("usdt/" TARGET ":tgt:ints")
int sec_ints(struct pt_regs *ctx)
{
	return report(ctx, 1);
}

SEC("usdt/" TARGET ":tgt:guarded")
int sec_guarded(struct pt_regs *ctx)
{
	return report(ctx, 2);
}

/* names no probe: attach_all() leaves it alone, as libbpf's skeletons do */
SEC("usdt")
int sec_manual(struct pt_regs *ctx)
{
	return report(ctx, 3);
}

#else

SEC("usdt")
int read_all(struct pt_regs *ctx)
{
	return report(ctx, 0);
}

struct entry_event {
	__u32 pid;
	__s32 line;
	__u64 cookie;
	char file[128];
	char func[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} entries SEC(".maps");

__u64 lines = 0;

SEC("usdt//usr/bin/python3.11:python:function__entry")
int BPF_USDT(python_entry, const char *file, const char *func, int line)
{
	struct entry_event *e = bpf_ringbuf_reserve(&entries, sizeof(*e), 0);

	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->line = line;
	e->cookie = bpf_usdt_cookie(ctx);
	bpf_probe_read_user_str(e->file, sizeof(e->file), file);
	bpf_probe_read_user_str(e->func, sizeof(e->func), func);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* CPython 3.11 fires function__entry only while python:line is enabled */
SEC("usdt//usr/bin/python3.11:python:line")
int BPF_USDT(python_line)
{
	__sync_fetch_and_add(&lines, 1);
	return 0;
}

#endif
