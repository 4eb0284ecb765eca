"""A program the kernel rejects costs the rejection and no more (issue 28):
loaded once without a log, once more with one to learn why -- and not a
third time with a larger log when the kernel (6.4+) kept the log's end,
where the reason is (the verifier's log of a long walk runs to megabytes)."""
from __future__ import annotations

import os

import pytest

from pyebpf.errors import VerifierError
from pyebpf.kernel.version import kernel_version
from pyebpf.objects import open_object

from .conftest import compile_bpf

pytestmark = pytest.mark.kernel

SOURCE = """\
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 256);
         __type(key, u32); __type(value, u64); } counters SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 4096);
         __type(key, u32); __type(value, u64); } start SEC(".maps");
SEC("tp_btf/sched_switch")
int BPF_PROG(long_walk)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	u32 pid = BPF_CORE_READ(task, pid);
	u64 now = bpf_ktime_get_ns(), delta = 0, *tsp;
	u64 vm = 0, flags = BPF_CORE_READ(task, flags);
	int prio = BPF_CORE_READ(task, prio);

	tsp = bpf_map_lookup_elem(&start, &pid);
	if (tsp)
		delta = now - *tsp;
	for (int j = 0; j < 8; j++) {
		if ((flags >> (j & 63)) & 1)
			delta += prio;
	}
#pragma clang loop unroll(disable)
	for (int j = 0; j < 200; j++) {
		u64 *c = bpf_map_lookup_elem(&counters, &j);
		if (!c)
			break;
		if (*c & 1)
			delta += *c;
		else
			vm ^= *c;
	}
	{ char b[8] = {}; return b[(delta + vm) & 0xff]; }
}
char LICENSE[] SEC("license") = "GPL";
"""


def test_a_long_rejection_keeps_the_reason_without_a_third_load(objects, tmp_path):
    if kernel_version() < (6, 4):
        pytest.skip("the kernel keeps a log's start, not its end (before 6.4)")
    (tmp_path / "walk.bpf.c").write_text(SOURCE)
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"),
               tmp_path / "vmlinux.h")
    with open_object(compile_bpf(tmp_path / "walk.bpf.c", tmp_path, "walk.o")) as obj:
        obj.load(strict=False)
        prog = obj.programs["long_walk"]
        assert prog.status == "rejected"
        exc = prog.error
        assert isinstance(exc, VerifierError)
        # the 64 KiB log of the second load, its end kept: the reason, the
        # instruction and the C line are all there (a full log is ~10x larger)
        assert len(exc.log) < 64 * 1024
        assert "invalid" in exc.message and exc.index is not None
        assert exc.origin.startswith("walk.bpf.c:") and "return b[(delta + vm) & 0xff]" in prog.reason
        assert exc.errno in (13, 22)              # the verifier's EACCES or EINVAL, not ENOSPC
