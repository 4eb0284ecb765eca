"""The bpf and trace filesystems: finding and mounting them, pinning objects on bpffs.

The conventions are those of :mod:`.core`.
"""
from __future__ import annotations

import errno as E
import os

from ..errors import PermissionDeniedError
from .constants import Cmd
from .core import Fd, addr, as_fd, attr_size, kernel_error, new_attr, try_bpf
from .ffi import ffi, lib

__all__ = ["BPF_FS_MAGIC", "bpffs_mounted", "mount_bpffs", "ensure_bpffs", "mount_tracefs",
           "obj_pin", "obj_get"]

_SZ_OBJ = attr_size("obj", "file_flags")


# ---------------------------------------------------------------------- mounts
def _mount(source: str, path: str, fstype: str, label: str) -> None:
    """``mount -t <fstype> <source> <path>`` (creating ``path``); raises on failure."""
    os.makedirs(path, exist_ok=True)
    if lib.mount(source.encode(), os.fsencode(path), fstype.encode(), 0, ffi.NULL) != 0:
        raise kernel_error("mount", ffi.errno, f"mounting {label} at {path}",
                           fstype=fstype, source=source, path=path)


def mount_tracefs(path: str) -> None:
    """``mount -t tracefs nodev <path>`` (needs root / CAP_SYS_ADMIN)."""
    _mount("nodev", path, "tracefs", "tracefs")


#: ``statfs().f_type`` of a bpf filesystem
BPF_FS_MAGIC = 0xCAFE4A11
_BPFFS_DEFAULT = "/sys/fs/bpf"


def _mounts() -> list[tuple[str, str]]:
    out = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    out.append((parts[1].replace("\\040", " "), parts[2]))
    except OSError:
        pass
    return out


def bpffs_mounted(path: str = _BPFFS_DEFAULT) -> bool:
    """True if ``path`` lies on a mounted bpf filesystem."""
    path = os.path.realpath(path)
    best, best_type = "", ""
    for mnt, fstype in _mounts():
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, best_type = mnt, fstype
    return best_type == "bpf"


def mount_bpffs(path: str = _BPFFS_DEFAULT) -> None:
    """``mount -t bpf bpf <path>`` (needs root / CAP_SYS_ADMIN)."""
    _mount("bpf", path, "bpf", "bpffs")


def ensure_bpffs(path: str) -> None:
    """Make sure ``path`` (a pin path) is on bpffs.

    If it is under /sys/fs/bpf and nothing is mounted there, mount bpffs when
    root; otherwise raise :class:`PermissionDeniedError` saying how.
    """
    parent = os.path.dirname(os.path.abspath(path)) or "/"
    if bpffs_mounted(parent):
        return
    real = os.path.realpath(parent)
    if real == _BPFFS_DEFAULT or real.startswith(_BPFFS_DEFAULT + "/"):
        if os.geteuid() == 0 and not bpffs_mounted(_BPFFS_DEFAULT):
            mount_bpffs(_BPFFS_DEFAULT)
            if real != _BPFFS_DEFAULT:
                os.makedirs(real, exist_ok=True)
            return
    raise PermissionDeniedError(
        E.EPERM, "BPF_OBJ_PIN", f"{parent} is not on a bpf filesystem",
        f"pin under /sys/fs/bpf (mount it as root: mount -t bpf bpf /sys/fs/bpf) "
        f"or mount bpffs at {parent}")


def obj_pin(path: str, fd: "int | Fd") -> None:
    """BPF_OBJ_PIN: pin a map/program/link at ``path`` (on bpffs)."""
    ensure_bpffs(path)
    p = os.fsencode(path) + b"\0"
    pb = ffi.from_buffer(p)
    attr = new_attr()
    attr.obj.pathname = addr(pb)
    attr.obj.bpf_fd = as_fd(fd)
    ret = try_bpf(Cmd.OBJ_PIN, attr, _SZ_OBJ)
    if ret < 0:
        raise kernel_error("BPF_OBJ_PIN", -ret, f"pinning fd {as_fd(fd)} at {path}", path=path)


def obj_get(path: str, *, flags: int = 0) -> Fd:
    """BPF_OBJ_GET: open the object pinned at ``path``.

    ``flags``: BPF_F_RDONLY / BPF_F_WRONLY (0 = read-write).
    """
    p = os.fsencode(path) + b"\0"
    pb = ffi.from_buffer(p)
    attr = new_attr()
    attr.obj.pathname = addr(pb)
    attr.obj.file_flags = flags
    ret = try_bpf(Cmd.OBJ_GET, attr, _SZ_OBJ)
    if ret < 0:
        raise kernel_error("BPF_OBJ_GET", -ret, f"opening {path}", path=path)
    return Fd(ret)
