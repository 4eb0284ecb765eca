"""The system programs and libraries the tests trace or read, found once.

``make test`` installs them (Makefile DEBS): Debian's python3 (built with
USDT probes, in the executable and in libpython), postgresql and a JRE
(libjvm.so: thousands of USDT probes), g++.  Nothing here is a hard-coded
version: each path is what this machine has.  A test whose file is absent
skips naming it (a failure under PYEBPF_REQUIRE_KERNEL=1, tests/conftest.py).
``from systools import PYTHON`` works from any test: tests/ is on sys.path.
"""
from __future__ import annotations

import glob
import os
import re
import sysconfig


def _debian_python() -> tuple[str, str]:
    """(path, "3.X") of Debian's python3: /usr/bin/python3 resolved."""
    real = os.path.realpath("/usr/bin/python3")
    m = re.search(r"python(3\.\d+)$", real)
    if m:
        return real, m.group(1)
    return "/usr/bin/python3.11", "3.11"


#: Debian's python3, e.g. /usr/bin/python3.11: USDT probes (python:*)
PYTHON, PYVER = _debian_python()
_MULTIARCH = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
#: its shared library (the same probes), e.g. libpython3.11.so.1.0
LIBPYTHON = f"/usr/lib/{_MULTIARCH}/libpython{PYVER}.so.1.0"
#: the bare library name bpftrace resolves (``libpython3.11``)
LIBPYTHON_NAME = f"libpython{PYVER}"


def _newest(pattern: str, default: str) -> str:
    hits = sorted(glob.glob(pattern), key=lambda p: [int(x) if x.isdigit() else x
                                                    for x in re.split(r"(\d+)", p)])
    return hits[-1] if hits else default


#: Debian's postgres server binary (USDT probes), newest major version
POSTGRES = _newest("/usr/lib/postgresql/*/bin/postgres", "/usr/lib/postgresql/15/bin/postgres")
#: every libjvm.so of the JDKs/JREs installed (hotspot's USDT probes)
JVM_LIBS = sorted(glob.glob("/usr/lib/jvm/*/lib/server/libjvm.so")) or \
    ["/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"]
#: one libjvm.so (the first found)
LIBJVM = JVM_LIBS[0]
