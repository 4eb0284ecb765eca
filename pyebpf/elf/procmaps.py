"""A process's mappings (``/proc/PID/maps``) and the files it maps, as paths usable from here."""
from __future__ import annotations

import os

from .._record import Record, record
from .errors import ElfError
from .file import open_elf

__all__ = ["MapEntry", "Module", "process_maps", "process_modules", "open_path"]

@record
class MapEntry(Record):
    """One line of ``/proc/PID/maps``."""

    start: int
    end: int
    perms: str
    offset: int
    dev: str
    inode: int
    path: str
    deleted: bool = False

    @property
    def executable(self) -> bool:
        """The mapping is executable (``x`` in its permissions)."""
        return "x" in self.perms


@record
class Module(Record):
    """A file mapped by a process (an executable or a shared library).

    ``path`` is the path /proc/PID/maps shows; ``open_path`` one this process
    can open that is the same file (checked by inode): ``path`` itself, or
    ``/proc/PID/root/<path>`` when the target lives in another mount
    namespace (a container), or ``/proc/PID/map_files/...`` (a deleted file).  ``maps`` are its mappings in address order.
    """

    pid: int
    path: str
    open_path: str
    maps: tuple[MapEntry, ...]

    @property
    def start(self) -> int:
        """The lowest address of the module's mappings."""
        return self.maps[0].start

    @property
    def end(self) -> int:
        """The end (exclusive) of the module's last mapping."""
        return self.maps[-1].end

    def contains(self, addr: int) -> bool:
        """Is ``addr`` inside one of the module's mappings?"""
        return any(m.start <= addr < m.end for m in self.maps)

    def file_offset(self, addr: int) -> int:
        """Runtime address in the process → offset in the file."""
        for m in self.maps:
            if m.start <= addr < m.end:
                return addr - m.start + m.offset
        raise ElfError(f"address {addr:#x} is not mapped from {self.path} in pid {self.pid}")

    def elf_address(self, addr: int) -> int:
        """Runtime address → ELF virtual address (for :meth:`ElfFile.symbolize`)."""
        m = next((m for m in self.maps if m.start <= addr < m.end), None)
        if m is None:
            raise ElfError(f"address {addr:#x} is not mapped from {self.path} in pid {self.pid}")
        return open_elf(self.open_path).offset_to_address(addr - m.start + m.offset,
                                                          executable=m.executable)

    def runtime_address(self, vaddr: int) -> int:
        """ELF virtual address → runtime address in the process."""
        off = open_elf(self.open_path).address_to_offset(vaddr)
        for m in self.maps:
            if m.offset <= off < m.offset + (m.end - m.start):
                return off - m.offset + m.start
        raise ElfError(f"{vaddr:#x} of {self.path} is not mapped in pid {self.pid}")


def process_maps(pid: int) -> list[MapEntry]:
    """Parse ``/proc/PID/maps``.  Raises ProcessLookupError when the process is gone."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise ProcessLookupError(3, f"no process with pid {pid}") from None
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        path = parts[5] if len(parts) > 5 else ""
        deleted = path.endswith(" (deleted)")
        if deleted:
            path = path[:-len(" (deleted)")]
        out.append(MapEntry(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16), parts[3],
                            int(parts[4]), path, deleted))
    return out


def _same_file(path: str, entry: MapEntry) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_ino != entry.inode:
        return False
    try:
        major, minor = (int(x, 16) for x in entry.dev.split(":"))
    except ValueError:
        return True
    return (os.major(st.st_dev), os.minor(st.st_dev)) == (major, minor)


def open_path(pid: int, entry: MapEntry) -> str:
    """A path to the mapped file usable from this process.

    /proc/PID/maps prints paths relative to *our* root when the file is
    reachable from it, else relative to the file's mount (a container's
    overlay, a private tmpfs).  So: the path itself if it is that file (same
    inode), else /proc/PID/root/<path>, else /proc/PID/map_files/<range>
    (root only; it also works for deleted files).
    """
    if not entry.deleted and _same_file(entry.path, entry):
        return entry.path
    in_root = f"/proc/{pid}/root{entry.path}"
    if not entry.deleted and _same_file(in_root, entry):
        return in_root
    by_range = f"/proc/{pid}/map_files/{entry.start:x}-{entry.end:x}"
    if _same_file(by_range, entry):
        return by_range
    return in_root


def process_modules(pid: int) -> list[Module]:
    """The files a process maps (executable first, then libraries, by address)."""
    entries = [m for m in process_maps(pid) if m.path.startswith("/") and m.inode]
    groups: dict[str, list[MapEntry]] = {}
    for m in entries:
        groups.setdefault(m.path, []).append(m)
    mods = []
    for path, maps in groups.items():
        maps.sort(key=lambda m: m.start)
        mods.append(Module(pid, path, open_path(pid, maps[0]), tuple(maps)))
    exe = None
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        pass
    mods.sort(key=lambda m: (m.path != exe, m.start))
    return mods
