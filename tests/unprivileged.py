"""Running Python as an unprivileged user (uid/gid 65534) from a root test."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

import pytest

DROP = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@functools.cache
def _why_not() -> str | None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv to drop to an unprivileged user"
    try:
        proc = subprocess.run([*DROP, sys.executable, "-c", "pass"], capture_output=True,
                              text=True, timeout=60, cwd="/")
    except OSError as exc:
        return f"cannot start {sys.executable} unprivileged: {exc}"
    if proc.returncode != 0:
        # e.g. pyenv's interpreters under /root, which uid 65534 may not read
        return (f"an unprivileged user cannot run {sys.executable}: "
                f"{proc.stderr.strip()[-200:] or proc.returncode}")
    return None


def python_argv() -> list[str]:
    """The command prefix that runs this interpreter as uid/gid 65534 (with
    no supplementary groups); skips the test where that cannot work."""
    reason = _why_not()
    if reason is not None:
        pytest.skip(reason)
    return [*DROP, sys.executable]
