"""What a process holds in the kernel, for tests that check nothing is left
behind: the ids of its BPF programs, maps and links (from ``/proc/PID/fdinfo``)
and which of them the kernel still has."""
from __future__ import annotations

import errno
import os


def bpf_ids(pid: int) -> dict[str, set[int]]:
    """The ids of the BPF programs, maps and links process ``pid`` holds fds of."""
    ids: dict[str, set[int]] = {"prog": set(), "map": set(), "link": set()}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        for line in info.splitlines():
            key, _, value = line.partition(":")
            kind = key.removesuffix("_id")
            if kind in ids and key.endswith("_id") and key.count("_") == 1:
                ids[kind].add(int(value))
    return ids


def alive_ids(ids: dict[str, set[int]]) -> dict[str, set[int]]:
    """Those of ``ids`` that still exist in the kernel (kinds with none left out)."""
    from pyebpf.kernel import syscall as sc
    get = {"prog": sc.prog_get_fd_by_id, "map": sc.map_get_fd_by_id,
           "link": sc.link_get_fd_by_id}
    alive: dict[str, set[int]] = {}
    for kind, kind_ids in ids.items():
        for obj_id in kind_ids:
            try:
                fd = get[kind](obj_id)
            except OSError as exc:
                assert exc.errno == errno.ENOENT, exc
                continue
            fd.close()
            alive.setdefault(kind, set()).add(obj_id)
    return alive
