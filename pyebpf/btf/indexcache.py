"""The on-disk cache of the index of the kernel's BTF (:class:`~.reader.Btf`):
each type record's word offset and the named types' ids sorted by name.

Walking ``/sys/kernel/btf/vmlinux`` (~130,000 records) costs a new process
10-20 ms of Python; reading this file back costs well under one.  The cache
is never required and never trusted blindly:

* where: ``$PYEBPF_BTF_CACHE`` (a directory; ``0``, ``off`` or empty: no
  cache), else ``$XDG_CACHE_HOME/pyebpf``, else ``/var/cache/pyebpf`` for
  root and ``~/.cache/pyebpf`` for others; one file per BTF path;
* the key is the BTF file's identity: size, mtime, inode, and a CRC of its
  header and of chunks sampled through it -- a new kernel, a reboot or a
  module reload makes a new key, and the stale file is replaced;
* the file carries a CRC of its whole content, is read only if owned by
  root or the current user, and the reader spot-checks the offsets against
  the blob (:meth:`~.reader.Btf._adopt`); anything wrong means "no cache";
* it is written to a temporary file in the same directory, then renamed over
  the old one, so readers and concurrent writers never see half a file;
  failing to write (read-only file system, no permission) is silent;
* it is mapped, not read (a new process's copy of ~1 MB into fresh memory
  costs it ~0.4 ms); a newer cache renamed over it leaves the mapping on the
  old file.
"""
from __future__ import annotations

import os
import struct
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mmap import mmap
    from typing import Sequence

__all__ = ["cache_dir", "identity", "load", "store"]

MAGIC = b"pyebpf-btf-idx\x00\x01"
#: magic, key length, record count, named count
_HEAD = struct.Struct("<16sIII")
_SAMPLES = 64
_CHUNK = 256


def cache_dir() -> str | None:
    """The cache directory, or None when the cache is off."""
    env = os.environ.get("PYEBPF_BTF_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "no") else env
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "pyebpf")
    if os.geteuid() == 0:
        return "/var/cache/pyebpf"
    return os.path.join(os.path.expanduser("~"), ".cache", "pyebpf")


def _path(btf_path: str) -> str | None:
    d = cache_dir()
    if d is None:
        return None
    tag = f"{zlib.crc32(btf_path.encode()):08x}"
    return os.path.join(d, f"btf-{os.path.basename(btf_path)}-{tag}.idx")


def identity(st: os.stat_result, data: bytes | mmap) -> bytes:
    """The key of a BTF file: its stat identity and a CRC of its header and
    of ``_SAMPLES`` chunks spread over it."""
    size = len(data)
    crc = zlib.crc32(data[:64])
    step = max(size // _SAMPLES, 1)
    for at in range(0, size, step):
        crc = zlib.crc32(data[at:at + _CHUNK], crc)
    crc = zlib.crc32(data[max(size - _CHUNK, 0):], crc)
    return struct.pack("<QQQQI", size, st.st_mtime_ns, st.st_ino, st.st_dev, crc)


def _arrays(raw: bytes | mmap, at: int, counts: tuple[int, ...]) -> list[Sequence[int]]:
    """Little-endian u32 arrays one after the other from ``at`` (views of
    ``raw``: no copy, on a little-endian host)."""
    out: list[Sequence[int]] = []
    view = memoryview(raw)
    for n in counts:
        part = view[at:at + 4 * n]
        if sys.byteorder == "little":
            out.append(part.cast("I"))
        else:
            from array import array
            a = array("I")
            a.frombytes(part)
            a.byteswap()
            out.append(a)
        at += 4 * n
    return out


def load(btf_path: str, key: bytes) -> tuple[Sequence[int], Sequence[int]] | None:
    """The cached (record offsets, ids by name) of ``btf_path`` under ``key``,
    or None (no cache, no file, another key, damage)."""
    path = _path(btf_path)
    if path is None:
        return None
    import mmap
    try:
        with open(path, "rb") as f:
            owner = os.fstat(f.fileno()).st_uid
            raw = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
    except (OSError, ValueError):            # (ValueError: an empty file)
        return None
    if owner not in (0, os.geteuid()) or len(raw) < _HEAD.size + 4:
        return None
    if zlib.crc32(memoryview(raw)[:-4]) != int.from_bytes(raw[-4:], "little"):
        return None
    magic, klen, nrec, nnamed = _HEAD.unpack_from(raw, 0)
    body = _HEAD.size + klen
    if magic != MAGIC or raw[_HEAD.size:body] != key or \
            body + 4 * (nrec + nnamed) + 4 != len(raw):
        return None
    offsets, by_name = _arrays(raw, body, (nrec, nnamed))
    return offsets, by_name


def store(btf_path: str, key: bytes, offsets: Sequence[int], by_name: Sequence[int]) -> None:
    """Write the index of ``btf_path`` (silently nothing when it cannot be)."""
    path = _path(btf_path)
    if path is None:
        return
    parts = [_HEAD.pack(MAGIC, len(key), len(offsets), len(by_name)), key]
    for seq in (offsets, by_name):
        parts.append(struct.pack(f"<{len(seq)}I", *seq))
    blob = b"".join(parts)
    blob += zlib.crc32(blob).to_bytes(4, "little")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
