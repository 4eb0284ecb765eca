"""Histogram buckets as numbers: which bucket a value falls in and the
range a bucket covers, for log2 and linear histograms (bpftrace's
numbering, so both outputs can be compared).  Pure Python: the language's
emitters (:mod:`pyebpf.lang.aggregations`) compute the same buckets in the
kernel, the printers (:mod:`pyebpf.draw.render`) label them.

* log2: bucket 0 holds negative values, bucket 1 holds 0, and bucket
  ``k >= 2`` holds ``[2**(k-2), 2**(k-1))``.
* linear ``(lo, hi, step)``: bucket 0 holds values below ``lo``, bucket
  ``1 + (v - lo) // step`` the values in ``[lo, hi)``, the last one ``>= hi``;
  at most :data:`LHIST_MAX_BUCKETS` (1000) buckets in ``[lo, hi)``.
"""
from __future__ import annotations

from ..errors import ProgramError

__all__ = ["LOG2_BUCKETS", "LHIST_MAX_BUCKETS", "log2_bucket", "log2_bucket_range",
           "linear_buckets", "linear_bucket_range"]

LOG2_BUCKETS = 66  # negative, zero, and one per power of two below 2**64


def log2_bucket(value: int) -> int:
    """The log2 bucket of ``value``, computed in Python (the same as the kernel's)."""
    if value < 0:
        return 0
    if value == 0:
        return 1
    return value.bit_length() + 1


def log2_bucket_range(bucket: int) -> tuple[int | None, int | None]:
    """``[lo, hi)`` of a log2 bucket (None for unbounded ends)."""
    if bucket == 0:
        return None, 0
    if bucket == 1:
        return 0, 1
    return 1 << (bucket - 2), 1 << (bucket - 1)


#: the most buckets a linear histogram may have between its lo and hi (bpftrace's
#: cap too): one per-CPU u64 each, so the map stays small and is made at once
LHIST_MAX_BUCKETS = 1000
_S64 = (-(1 << 63), 1 << 63)


def linear_buckets(lo: int, hi: int, step: int) -> int:
    """The number of buckets of a linear histogram ``(lo, hi, step)``, the two
    open-ended ones (below ``lo``, ``>= hi``) included.

    The one check of the parameters, made before anything is built: integers
    (signed 64-bit), ``lo < hi``, ``step > 0`` and at most
    :data:`LHIST_MAX_BUCKETS` buckets in ``[lo, hi)``.  Raises
    :class:`~pyebpf.errors.ProgramError` (a ``ValueError``).
    """
    for name, v in (("min", lo), ("max", hi), ("step", step)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ProgramError(f"lhist {name} must be an integer, not {v!r}")
        if not _S64[0] <= v < _S64[1]:
            raise ProgramError(f"lhist {name} {v} does not fit in signed 64 bits")
    if step <= 0 or hi <= lo:
        raise ProgramError(f"lhist needs min < max and step > 0 (got {lo}, {hi}, {step})")
    inside = (hi - lo + step - 1) // step
    if inside > LHIST_MAX_BUCKETS:
        raise ProgramError(f"lhist({lo}, {hi}, {step}) would have {inside} buckets; at most "
                           f"{LHIST_MAX_BUCKETS} are allowed (raise step or narrow min..max)")
    return inside + 2


def linear_bucket_range(bucket: int, lo: int, hi: int, step: int) -> tuple[int | None, int | None]:
    """``[start, end)`` of a linear histogram's bucket (None for an open end)."""
    if bucket == 0:
        return None, lo
    if bucket == linear_buckets(lo, hi, step) - 1:
        return hi, None
    start = lo + (bucket - 1) * step
    return start, min(start + step, hi)
