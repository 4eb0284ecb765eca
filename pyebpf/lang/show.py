"""``--show-program``: the eBPF generated for a bpftrace program, per probe,
in the llvm dialect, each line of the script above the instructions it
became, and the maps. Pure: the maps are only described, so no privilege
is needed."""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .codegen import Unit

__all__ = ["show_unit"]


def show_unit(unit: Unit, dialect: str = "llvm") -> str:
    """The text of every program of ``unit``, then its maps."""
    from ..text import disassemble
    parts = []
    for plan in unit.probes:
        where = plan.source.describe() if plan.source is not None else \
            f"{plan.kind} (run once with BPF_PROG_TEST_RUN)"
        prog = plan.program
        stack = max((-off for off, _, _ in prog.stack.slots), default=0)
        parts.append(f"; probe {plan.name}\n; attached at {where}\n"
                     f"; {len(prog)} instructions, {stack} bytes of stack\n"
                     + disassemble(prog, dialect=dialect).rstrip("\n"))
    maps = ["; maps"]
    for name, m in sorted(unit.maps.items()):
        maps.append(f";   {name}: {m.kname}, key {m.key or 'none'}, value {m.value}"
                    f" ({type(m.spec).__name__ if not hasattr(m.spec, 'cls') else m.spec.cls.__name__},"
                    f" {m.spec.key_size}-byte keys, {m.spec.value_size}-byte values)")
    maps.append(f";   events: {unit.ringbuf.name} (ring buffer, {unit.ringbuf.max_entries} bytes)")
    skipped = [f"; skipped (as bpftrace skips it): {why}" for why in unit.skipped]
    return "\n\n".join(parts + ["\n".join(maps)] + (["\n".join(skipped)] if skipped else [])) \
        + "\n"
