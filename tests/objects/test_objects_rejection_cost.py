"""A program the kernel rejects costs the rejection and no more (issue 28):
loaded once without a log, once more with one to learn why -- and not a
third time with a larger log when the kernel (6.4+) kept the log's end,
where the reason is (the verifier's log of a long walk runs to megabytes).
The program is one of the benchmark's generated object (benchmarks.large_object),
made unverifiable at its end, after its walk."""
from __future__ import annotations

import os

import pytest

from pyebpf.errors import VerifierError
from pyebpf.kernel.version import kernel_version
from pyebpf.objects import open_object

from benchmarks.large_object import source

from .conftest import compile_bpf

pytestmark = pytest.mark.kernel



def test_a_long_rejection_keeps_the_reason_without_a_third_load(objects, tmp_path):
    if kernel_version() < (6, 4):
        pytest.skip("the kernel keeps a log's start, not its end (before 6.4)")
    (tmp_path / "walk.bpf.c").write_text(source(1, 200, reject=1))
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"),
               tmp_path / "vmlinux.h")
    with open_object(compile_bpf(tmp_path / "walk.bpf.c", tmp_path, "walk.o")) as obj:
        obj.load(strict=False)
        prog = obj.programs["handle_0"]
        assert prog.status == "rejected"
        exc = prog.error
        assert isinstance(exc, VerifierError)
        # the 64 KiB log of the second load, its end kept: the reason, the
        # instruction and the C line are all there (a full log is ~10x larger)
        assert len(exc.log) < 64 * 1024
        assert "invalid" in exc.message and exc.index is not None
        assert exc.origin.startswith("walk.bpf.c:") and "return b[delta & 0xff];" in prog.reason
        assert exc.errno in (13, 22)              # the verifier's EACCES or EINVAL, not ENOSPC
