"""ElfFile: one ELF file's headers, symbols and probe locations; :func:`open_elf`."""
from __future__ import annotations

import os
from _thread import allocate_lock as _allocate_lock

from .boundaries import InstructionChecks
from .errors import ElfError
from .layouts import STT_GNU_IFUNC
from .symbols import Location, Symbol, _Spec, parse_location

__all__ = ["ElfFile", "open_elf"]


class ElfFile(InstructionChecks):
    """One ELF file: headers, symbols, address maps.  Use :func:`open_elf`.

    Attributes: ``path``, ``type`` (``"ET_EXEC"``/``"ET_DYN"``), ``machine``
    (``"EM_X86_64"``...), ``elfclass`` (32/64), ``little_endian``,
    ``segments`` (PT_LOAD only), ``sections``.  Built in layers, one concern
    each: :class:`~pyebpf.elf.headers.ElfHeaders` (headers, the
    vaddr <-> offset rule), :class:`~pyebpf.elf.symbols.SymbolTable`,
    :class:`~pyebpf.elf.boundaries.InstructionChecks`, and here the
    resolution of probe locations.

    A damaged file gives :class:`ElfError` from the constructor or from the
    reader that meets the damage (an offset, size or count that does not fit
    in the file), never another exception.
    """

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<bytes>") -> ElfFile:
        """An ELF image held in memory (``path`` names it in messages)."""
        return cls(path, bytes(data))

    def resolve(self, where: "str | int", *, check_boundary: bool = True,
                functions_only: bool = True) -> Location:
        """Turn ``"sym"``, ``"sym+off"``, ``"sym@@VER"``, ``"0xADDR"`` (or an int
        address) into a :class:`Location` with the file offset for the kernel.

        Raises :class:`SymbolNotFoundError`, :class:`AmbiguousSymbolError`,
        :class:`InstructionBoundaryError` or :class:`ElfError`.
        """
        spec = parse_location(where)
        if spec.address is not None:
            return self._address_location(spec.address, self.address_to_offset(spec.address),
                                          check_boundary)
        sym = self._symbol_for_spec(spec, functions_only)
        if sym.type == STT_GNU_IFUNC:
            raise ElfError(
                f"{sym.versioned_name} in {self.path} is a GNU indirect function (IFUNC): "
                "its address is a resolver that runs once at load time and picks an "
                "implementation; probe the implementation instead (e.g. a "
                f"__{sym.name}_* variant, listed by `nm -D`/`nm` on the file)")
        vaddr = sym.address + spec.offset
        if check_boundary and spec.offset:
            self.check_instruction_boundary(sym, spec.offset)
        return Location(self.path, self.address_to_offset(vaddr), vaddr, sym, spec.offset)

    def _symbol_for_spec(self, spec: _Spec, functions_only: bool) -> Symbol:
        name = spec.name or ""
        if spec.version is not None:
            name += ("@@" if spec.default_only else "@") + spec.version
        return self.symbol(name, functions_only=functions_only)

    def location_at_offset(self, file_offset: int, *, check_boundary: bool = True) -> Location:
        """A :class:`Location` for a raw file offset (with its symbol when known).

        Checked like an address by :meth:`check_instruction_address` unless
        ``check_boundary`` is False.
        """
        return self._address_location(self.offset_to_address(file_offset, executable=True),
                                      file_offset, check_boundary)

    def _address_location(self, vaddr: int, file_offset: int,
                          check_boundary: bool) -> Location:
        if check_boundary:
            self.check_instruction_address(vaddr)
        hit = self.function_at(vaddr)
        sym, delta = hit if hit is not None else (None, 0)
        return Location(self.path, file_offset, vaddr, sym, delta)



_CACHE: dict[tuple[int, int, int, int], ElfFile] = {}
_CACHE_LOCK = _allocate_lock()
_CACHE_MAX = 64


def open_elf(path: str) -> ElfFile:
    """The :class:`ElfFile` for ``path``, parsed once and cached.

    The cache key is the file itself (device, inode, size, mtime), so another
    path to the same file (a symlink, ``/proc/PID/root/...``) shares the
    entry and a rebuilt file is parsed again.  ``/proc/PID/root`` paths are
    never resolved through the magic link, so a container's files stay the
    container's.  Raises FileNotFoundError or :class:`ElfError`.
    """
    path = os.path.abspath(path)
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            if hit.path != path and not os.path.exists(hit.path):
                hit.path = path       # first opened via a /proc/PID/root of a gone process
            return hit
    elf = ElfFile(path)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = elf
    return elf
