"""Printing aggregations the way bpftrace prints them (and as JSON).

``format_hist`` gives bpftrace's histogram lines::

    @usecs:
    [256, 512)            12 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
    [512, 1K)              3 |@@@@@@@@@@@@@                                       |

so the same one-liner traced by pyebpf and by bpftrace can be compared line
for line.
"""
from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

from .buckets import log2_bucket_range

BAR_WIDTH = 52
_SUFFIXES = ("", "K", "M", "G", "T", "P", "E")


def _human(n: int) -> str:
    """1024 -> '1K', 3 -> '3' (powers of 1024 get a suffix, like bpftrace)."""
    i = 0
    while n >= 1024 and n % 1024 == 0 and i < len(_SUFFIXES) - 1:
        n //= 1024
        i += 1
    return f"{n}{_SUFFIXES[i]}"


def log2_label(bucket: int) -> str:
    """A log2 bucket's label as bpftrace prints it: ``(..., 0)``, ``[1]``,
    ``[4, 8)``, ``[1K, 2K)``."""
    lo, hi = log2_bucket_range(bucket)
    if lo is None:
        return "(..., 0)"
    if hi is None or hi == lo + 1:
        return f"[{lo}]"
    return f"[{_human(lo)}, {_human(hi)})"


def linear_label(lo: int | None, hi: int | None) -> str:
    """A linear bucket's label: ``[lo, hi)``, or ``(..., hi)`` / ``[lo, ...)``
    for the open-ended ones (``lo`` / ``hi`` None)."""
    if lo is None:
        return f"(..., {hi})"
    if hi is None:
        return f"[{lo}, ...)"
    return f"[{lo}, {hi})"


def hist_lines(buckets: Mapping[int, int], label: Callable[[int], str],
               div: int = 1) -> list[str]:
    """One line per bucket from the lowest to the highest non-empty one.
    As bpftrace's ``print(@h, 0, div)``, the counts shown are divided by
    ``div`` but the bars are drawn from the counts before."""
    nonzero = [b for b, c in buckets.items() if c]
    if not nonzero:
        return []
    top = max(buckets[b] for b in nonzero)
    lines = []
    for b in range(min(nonzero), max(nonzero) + 1):
        count = buckets.get(b, 0)
        bar = "@" * (count * BAR_WIDTH // top) if top else ""
        lines.append(f"{label(b):<16}{count // div:>8} |{bar:<{BAR_WIDTH}}|")
    return lines


def _key_text(key: Any) -> str:
    if isinstance(key, tuple):
        return ", ".join(_key_text(k) for k in key)
    if isinstance(key, bytes):
        return key.rstrip(b"\0").decode(errors="replace")
    return str(key)


def format_hist(name: str, data: Mapping[Any, Any], *,
                linear: tuple[int, int, int] | None = None, keyed: bool = False) -> str:
    """A histogram (``{bucket: count}``, or ``{key: {bucket: count}}`` when
    keyed) as bpftrace prints it."""
    label = log2_label if linear is None else _linear_labels(*linear)
    out = []
    groups = sorted(data.items(), key=lambda kv: sum(kv[1].values())) if keyed else [(None, data)]
    for key, buckets in groups:
        head = f"@{name}[{_key_text(key)}]: " if keyed else f"@{name}: "
        out.append(head)
        out.extend(hist_lines(buckets, label))
        out.append("")
    return "\n".join(out)


def _linear_labels(lo: int, hi: int, step: int) -> Callable[[int], str]:
    """The labels of the buckets of ``lhist(..., lo, hi, step)`` by number
    (0: below ``lo``, the last: ``hi`` and above)."""
    nb = (hi - lo + step - 1) // step + 2

    def label(b: int) -> str:
        if b == 0:
            return linear_label(None, lo)
        if b == nb - 1:
            return linear_label(hi, None)
        start = lo + (b - 1) * step
        return linear_label(start, min(start + step, hi))
    return label


def format_count(name: str, data: Mapping[Any, Any] | int) -> str:
    """Counts (or sums) as bpftrace prints them: ``@name[key]: value`` sorted by value."""
    if not isinstance(data, Mapping):
        return f"@{name}: {data}"
    return "\n".join(f"@{name}[{_key_text(k)}]: {v}"
                     for k, v in sorted(data.items(), key=lambda kv: (kv[1], str(kv[0]))))


def format_value(value: Any) -> str:
    """A key or value as printed inside ``@name[...]``: tuples joined with
    ``, ``, bytes up to their NULs as text, anything else by ``str``."""
    return _key_text(value)


# ---------------------------------------------------------------- printf
_SPEC = (r"%(?P<flags>[-+ #0]*)(?P<width>\d*)(?:\.(?P<prec>\d+))?"
         r"(?P<len>hh|h|ll|l|z|j|t|L)?(?P<conv>[diouxXcsp%])")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "r": "\r", "a": "\a", "0": "\0",
            "e": "\x1b"}


def unescape(text: str) -> str:
    """C escapes of a format string (``\\n``, ``\\t``, ``\\\\``, ``\\"``...)."""
    import re                  # (imported when used: it costs start-up ~5 ms)
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)


def printf_specs(fmt: str) -> list[str]:
    """The conversion characters of a printf format (``%%`` excluded)."""
    import re
    return [m.group("conv") for m in re.finditer(_SPEC, fmt) if m.group("conv") != "%"]


def split_field(field: str) -> tuple[str | None, str]:
    """A print field's name and expression: ``"n=arg0"`` -> ``("n", "arg0")``;
    a field without a name (``"arg0"``, ``"arg0==1"``) -> ``(None, field)``."""
    name, eq, text = field.partition("=")
    if eq and name.strip().isidentifier() and not text.startswith("="):
        return name.strip(), text
    return None, field


def event_format(fmt: str | None, nfields: int, who: str,
                 error: Callable[[str], Exception]) -> str | None:
    """The C-style format of ``who``'s event of ``nfields`` fields, unescaped
    and ending in a newline (None: no format).  No field, or a conversion
    count other than ``nfields``, raises ``error(message)``."""
    if not nfields:
        raise error(f"{who} needs at least one field")
    if fmt is None:
        return None
    fmt = unescape(fmt)
    n = len(printf_specs(fmt))
    if n != nfields:
        raise error(f"the format {fmt!r} has {n} conversion(s) but {nfields} field(s) were given")
    return fmt if fmt.endswith("\n") else fmt + "\n"


def format_printf(fmt: str, values: list[Any]) -> str:
    """C ``printf`` of ``values`` (ints, strings, bytes) the way bpftrace's does:
    ``%d``/``%i`` signed 64-bit, ``%u %x %X %o`` unsigned, ``%s`` text,
    ``%c`` a character, ``%p`` an address; length modifiers are ignored."""
    import re
    it = iter(values)

    def conv(m: "re.Match[str]") -> str:
        c = m.group("conv")
        if c == "%":
            return "%"
        spec = "%" + m.group("flags") + m.group("width") + \
            (("." + m.group("prec")) if m.group("prec") is not None else "")
        try:
            v = next(it)
        except StopIteration:
            return m.group(0)
        if isinstance(v, (bytes, bytearray)):
            v = v.split(b"\0", 1)[0].decode(errors="replace")
        if c == "s":
            return (spec + "s") % (v,)
        if isinstance(v, str):
            return (spec + "s") % (v,)
        v = int(v)
        if c in "di":
            v &= (1 << 64) - 1
            return (spec + "d") % (v - (1 << 64) if v >= 1 << 63 else v)
        if c in "uxXo":
            return (spec + ("d" if c == "u" else c)) % (v & ((1 << 64) - 1))
        if c == "c":
            return (spec + "c") % chr(v & 0xFF)
        return (spec + "s") % (f"0x{v & ((1 << 64) - 1):x}",)

    return re.sub(_SPEC, conv, fmt)


def hist_json(buckets: Mapping[int, int],
              bucket_range: Callable[[int], tuple[int | None, int | None]], div: int = 1
              ) -> list[dict[str, int | None]]:
    """A histogram as bpftrace's JSON output lists it: ``{"min", "max", "count"}``
    per bucket from the lowest to the highest non-empty one (``max``
    inclusive; None for an open end; counts divided by ``div``)."""
    nonzero = [b for b, c in buckets.items() if c]
    if not nonzero:
        return []
    out: list[dict[str, int | None]] = []
    for b in range(min(nonzero), max(nonzero) + 1):
        lo, hi = bucket_range(b)
        out.append({"min": lo, "max": None if hi is None else hi - 1, "count": buckets.get(b, 0) // div})
    return out


# ---------------------------------------------------------------- raw data
def raw_json(data: Any) -> Any:
    """``data`` (an aggregation's value: ints, tuples, bytes, nested dicts
    with any keys) as something :func:`json.dumps` takes, losing nothing a
    reader needs: the fallback when formatting failed, for results are data."""
    if isinstance(data, Mapping):
        return {_raw_key(k): raw_json(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [raw_json(v) for v in data]
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).rstrip(b"\0").decode(errors="backslashreplace")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    return repr(data)


def _raw_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, tuple):
        return ", ".join(_raw_key(k) for k in key)
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).rstrip(b"\0").decode(errors="backslashreplace")
    return str(key) if isinstance(key, (int, float)) or key is None else repr(key)


def format_raw(name: str, data: Any) -> str:
    """``@name (raw): {...}``: an aggregation's contents as one JSON value."""
    import json
    return f"@{name.lstrip('@')} (raw): {json.dumps(raw_json(data))}\n"
