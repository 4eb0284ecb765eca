"""The ``.eh_frame`` unwind table: where functions start, without symbols.

Every FDE (frame description entry) gives one function's first address and
length; ``strip`` keeps ``.eh_frame`` (unwinding needs it), so
:func:`parse_eh_frame` finds function starts in stripped binaries.
"""
from __future__ import annotations

import struct

from .errors import ElfError

__all__ = ["parse_eh_frame"]

# DW_EH_PE pointer encodings: the low nibble is the format, bits 4-6 what the
# value is relative to, 0x80 "indirect" (the value is where the pointer is).
_EH_FORMATS = {0x02: "H", 0x03: "I", 0x04: "Q", 0x0A: "h", 0x0B: "i", 0x0C: "q"}
_EH_PCREL, _EH_INDIRECT, _EH_OMIT = 0x10, 0x80, 0xFF


def _uleb(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """An unsigned LEB128 at ``pos`` (ending before ``limit``): ``(value, next pos)``."""
    value = shift = 0
    while True:
        if pos >= limit:
            raise ElfError("a LEB128 number runs past the end of its section")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 70:
            raise ElfError("a LEB128 number is longer than 10 bytes")


def _sleb(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A signed LEB128 at ``pos`` (ending before ``limit``): ``(value, next pos)``."""
    start = pos
    value, pos = _uleb(data, pos, limit)
    bits = 7 * (pos - start)
    if data[pos - 1] & 0x40:
        value -= 1 << bits
    return value, pos


def _eh_pointer(data: bytes, pos: int, limit: int, enc: int, addr_size: int, e: str,
                base: int) -> tuple[int | None, int]:
    """A DW_EH_PE-encoded pointer at ``pos`` (ending before ``limit``) of a
    section loaded at ``base``.

    Returns ``(value, next pos)``; value is None when it cannot be known
    from the file alone (an indirect pointer, or one relative to the text,
    data or function base), but the field is still skipped.
    """
    fmt = enc & 0x0F
    if fmt == 0x01:
        value, end = _uleb(data, pos, limit)
    elif fmt == 0x09:
        value, end = _sleb(data, pos, limit)
    else:
        code = ("Q" if addr_size == 8 else "I") if fmt == 0 else _EH_FORMATS.get(fmt, "")
        if not code:
            raise ElfError(f"unknown pointer encoding {enc:#04x} in .eh_frame")
        end = pos + struct.calcsize(code)
        if end > limit:
            raise ElfError("a pointer runs past the end of .eh_frame")
        (value,) = struct.unpack_from(e + code, data, pos)
    app = enc & 0x70
    if app == _EH_PCREL:
        value += base + pos
    elif app or enc & _EH_INDIRECT:
        return None, end
    return value & ((1 << (8 * addr_size)) - 1), end


def _eh_cie(data: bytes, pos: int, end: int, addr_size: int, e: str,
            base: int) -> int | None:
    """The FDE pointer encoding a CIE (whose version byte is at ``pos``)
    gives, or None when its augmentation cannot be read."""
    if pos >= end:
        raise ElfError(f"a CIE at {pos:#x} of .eh_frame is truncated")
    version = data[pos]
    aug_end = data.find(b"\0", pos + 1, end)
    if aug_end < 0:
        raise ElfError(f"the augmentation string of the CIE at {pos:#x} has no end")
    aug = data[pos + 1:aug_end]
    p = aug_end + 1
    if aug.startswith(b"eh"):
        p += addr_size                          # old GNU: an eh_data pointer
    if version == 4:
        p += 2                                  # address_size, segment_selector_size
    _code_align, p = _uleb(data, p, end)
    _data_align, p = _sleb(data, p, end)
    if version == 1:
        p += 1
    else:
        _ra, p = _uleb(data, p, end)
    if not aug.startswith(b"z"):
        return 0 if aug in (b"", b"eh") else None
    length, p = _uleb(data, p, end)
    stop = p + length
    if stop > end:
        raise ElfError(f"the augmentation data of the CIE at {pos:#x} runs past its end")
    fde_enc = 0                                 # DW_EH_PE_absptr
    for ch in aug[1:]:
        if ch == 0x52:                          # 'R': the FDE pointer encoding
            if p >= stop:
                raise ElfError(f"the CIE at {pos:#x} lacks its 'R' augmentation byte")
            fde_enc = data[p]
            p += 1
        elif ch == 0x4C:                        # 'L': LSDA encoding
            p += 1
        elif ch == 0x50:                        # 'P': personality encoding and pointer
            if p >= stop:
                raise ElfError(f"the CIE at {pos:#x} lacks its 'P' augmentation byte")
            enc = data[p]
            _pers, p = _eh_pointer(data, p + 1, stop, enc & 0x7F, addr_size, e, base)
        elif ch in b"SBG":                      # signal frame, ARM64 B key, MTE: no data
            continue
        else:
            break                               # unknown: the length skips the rest
    return fde_enc if fde_enc != _EH_OMIT else None


def parse_eh_frame(data: bytes, address: int, *, address_size: int = 8,
                   little_endian: bool = True) -> list[tuple[int, int]]:
    """The functions an ``.eh_frame`` section describes: ``[(start, size), ...]``.

    ``data`` is the section, ``address`` its virtual address (pc-relative
    pointers are relative to it).  Each FDE (frame description entry) gives
    one function's first address and length; the result is sorted by start
    and keeps FDEs whose start can be computed from the file (the usual
    ``DW_EH_PE_pcrel|sdata4`` and absolute encodings).  Raises
    :class:`ElfError` for a malformed section.
    """
    e = "<" if little_endian else ">"
    cies: dict[int, int | None] = {}
    out: list[tuple[int, int]] = []
    pos = 0
    size = len(data)
    while pos + 4 <= size:
        (length,) = struct.unpack_from(e + "I", data, pos)
        id_pos, id_size = pos + 4, 4
        if length == 0xFFFFFFFF:
            if pos + 12 > size:
                raise ElfError(f"the 64-bit length at {pos:#x} of .eh_frame is truncated")
            (length,) = struct.unpack_from(e + "Q", data, pos + 4)
            id_pos, id_size = pos + 12, 8
        end = id_pos + length
        if length == 0:                         # a terminator (crtend.o's) or padding
            pos = end
            continue
        if end > size or length < id_size:
            raise ElfError(f"the .eh_frame entry at {pos:#x} ({length} bytes) runs past the "
                           f"end of the section ({size} bytes)")
        (cie_ptr,) = struct.unpack_from(e + ("Q" if id_size == 8 else "I"), data, id_pos)
        body = id_pos + id_size
        if cie_ptr == 0:                        # a CIE
            cies[pos] = _eh_cie(data, body, end, address_size, e, address)
        else:                                   # an FDE: cie_ptr is the distance back to its CIE
            cie_pos = id_pos - cie_ptr
            if cie_pos not in cies:
                if cie_pos < 0:
                    raise ElfError(f"the FDE at {pos:#x} of .eh_frame points before the "
                                   "section")
                cies[cie_pos] = _eh_cie_at(data, cie_pos, address_size, e, address)
            enc = cies[cie_pos]
            if enc is not None:
                start, p = _eh_pointer(data, body, end, enc, address_size, e, address)
                length_, _p = _eh_pointer(data, p, end, enc & 0x0F, address_size, e,
                                          address)
                if start is not None and length_ is not None:
                    out.append((start, length_))
        pos = end
    out.sort()
    return out


def _eh_cie_at(data: bytes, pos: int, address_size: int, e: str, base: int) -> int | None:
    """The FDE encoding of the CIE that starts at ``pos`` (an FDE's pointer
    to a CIE not met yet, or to something that is not a CIE)."""
    if pos + 8 > len(data):
        raise ElfError(f"an FDE of .eh_frame points to {pos:#x}, outside the section")
    (length, cie_id) = struct.unpack_from(e + "II", data, pos)
    if length == 0xFFFFFFFF or cie_id != 0 or pos + 4 + length > len(data):
        raise ElfError(f"an FDE of .eh_frame points to {pos:#x}, which is not a CIE")
    return _eh_cie(data, pos + 8, pos + 4 + length, address_size, e, base)
