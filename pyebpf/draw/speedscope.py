"""The speedscope file format (https://www.speedscope.app/file-format-schema.json).

One ``sampled`` profile: the distinct frame names are listed once in
``shared.frames``; each distinct stack is one sample (its frame indices,
outermost first) whose weight is its count.
"""
from __future__ import annotations

from .folded import Stacks

__all__ = ["speedscope_json", "speedscope_document", "SCHEMA"]

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope_document(stacks: Stacks, name: str = "pyebpf profile",
                        unit: str = "none") -> dict[str, object]:
    """The speedscope document of ``stacks`` as a dict (``unit``: one of
    speedscope's weight units; ``none`` for sample counts)."""
    from .. import __version__
    index: dict[str, int] = {}
    samples: list[list[int]] = []
    weights: list[int] = []
    for frames, count in sorted(stacks.items()):
        if count <= 0 or not frames:
            continue
        samples.append([index.setdefault(f, len(index)) for f in frames])
        weights.append(count)
    total = sum(weights)
    return {
        "$schema": SCHEMA,
        "shared": {"frames": [{"name": f} for f in index]},
        "profiles": [{"type": "sampled", "name": name, "unit": unit, "startValue": 0,
                      "endValue": total, "samples": samples, "weights": weights}],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": f"pyebpf {__version__}",
    }


def speedscope_json(stacks: Stacks, name: str = "pyebpf profile", unit: str = "none") -> str:
    """:func:`speedscope_document` as JSON text."""
    import json
    return json.dumps(speedscope_document(stacks, name, unit), separators=(",", ":")) + "\n"
