"""Loading programs into the kernel, and looking at what the kernel made of them.

:func:`load` takes a DSL :class:`~pyebpf.program.Program`, assembly text, or
raw bytes; binds its symbolic map references to real maps; runs the static
helper check; and calls ``BPF_PROG_LOAD``.  When the verifier says no, the
:class:`~pyebpf.errors.VerifierError` names the failing instruction, the
Python or ``.s`` line that emitted it, and the verifier's own words, and keeps
the whole log.

The :class:`LoadedProgram` it returns owns the program's fd and offers
``test_run``, ``info``, the translated program as the kernel rewrote it
(``xlated``) and the JIT's x86-64 code (``jited_asm``).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping

    from .isa import Insn
    from .kernel import Fd, ProgInfo, TestRun
    from .program import Program

# (the instruction set, the DSL and its static check are imported where they are
# used: a clang-built object's programs load without them, see pyebpf.objects)
from .errors import OptionError, ProgramError, VerifierError
from .kernel import ProgType
from .kernel.lifetime import FdOwner
from .kernel import syscall as _sys     # each wrapper's module is imported on first use

#: Friendly names accepted for ``prog_type`` (besides ProgType members and ints).
PROG_TYPE_ALIASES = {"uprobe": ProgType.KPROBE, "uretprobe": ProgType.KPROBE,
                     "usdt": ProgType.KPROBE, "kretprobe": ProgType.KPROBE,
                     "tc": ProgType.SCHED_CLS, "socket": ProgType.SOCKET_FILTER}


def prog_type_of(value: "str | int | ProgType") -> int:
    """``ProgType`` number from a member, an int, or a name like ``"xdp"``,
    ``"socket_filter"``, ``"uprobe"``."""
    if isinstance(value, int):
        return int(value)
    key = value.strip().lower().replace("-", "_")
    if key in PROG_TYPE_ALIASES:
        return int(PROG_TYPE_ALIASES[key])
    try:
        return int(ProgType[key.upper()])
    except KeyError:
        names = sorted({m.name.lower() for m in ProgType} | set(PROG_TYPE_ALIASES))
        raise OptionError(f"unknown program type {value!r}; known: {', '.join(names)}") from None


# ---------------------------------------------------------------------------
# verifier log -> failing instruction

_INSN_LINE = r"^(\d+): \(([0-9a-f]{2})\) (.*?)(?:\s+; .*)?$"
_INSN_IN_MESSAGE = r"\binsn (?:#)?(\d+)\b|\bfrom insn (\d+)\b|\binsn_idx (\d+)\b"


def failing_instruction(log: str, message: str) -> tuple[int | None, str | None]:
    """The instruction index (in slots) the verifier complained about, and its
    text as the verifier printed it.

    The index is taken from the message itself when it names one
    (``unreachable insn 5``, ``back-edge from insn 7 to 2``); otherwise it is
    the last instruction the verifier printed before giving up.
    """
    import re                 # (a rejection's path: not imported at start-up)
    index = text = None
    printed: dict[int, str] = {}
    insn_line = re.compile(_INSN_LINE)
    for line in log.splitlines():
        m = insn_line.match(line)
        if m:
            index, text = int(m.group(1)), m.group(3)
            printed[index] = text
    m = re.search(_INSN_IN_MESSAGE, message or "")
    if m:
        named = int(next(g for g in m.groups() if g is not None))
        return named, printed.get(named)
    return index, text


# ---------------------------------------------------------------------------

class LoadedProgram(FdOwner):
    """A program loaded in the kernel.

    Owns the program's fd (an :class:`~pyebpf.kernel.lifetime.FdOwner`):
    ``close()`` (idempotent), ``with`` blocks and garbage collection release
    it; the kernel frees the program once nothing else holds it.  ``log`` holds the verifier log when one
    was asked for (``log_level`` > 0).  ``insns`` are the instructions as
    loaded (given as raw bytes, they are decoded on first use).
    """

    def __init__(self, fd: Fd, prog_type: int, program: Program | None,
                 insns: list[Insn] | bytes,
                 maps: Mapping[str, Any] | Callable[[], Mapping[str, Any]], log: str = "",
                 name: str = "", expected_attach_type: int = 0):
        self._own_fd(fd)
        self.prog_type = prog_type
        #: as loaded; attach functions read it (uprobe_multi needs 48)
        self.expected_attach_type = expected_attach_type
        self.program = program
        self._insns = insns
        self._maps = maps if callable(maps) else dict(maps)
        self.log = log
        self.name = name

    @property
    def maps(self) -> dict[str, Any]:
        """The maps the program uses, by name (given as a callable, as an
        object's programs give them: asked for on first use)."""
        maps = self._maps
        if callable(maps):
            maps = self._maps = dict(maps())
        return maps

    @maps.setter
    def maps(self, value: Mapping[str, Any]) -> None:
        self._maps = dict(value)

    @property
    def insns(self) -> list[Insn]:
        """The instructions as loaded (before the kernel rewrote them: see
        :meth:`xlated`)."""
        if isinstance(self._insns, bytes):
            from .isa import decode
            self._insns = decode(self._insns)
        return self._insns

    # -- lifetime (fd, fileno(), close(), with: an FdOwner's)
    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd {self._fd.fileno()}"
        return f"<LoadedProgram {self.name!r} {ProgType(self.prog_type).name.lower()} ({state})>"

    # -- running
    def test_run(self, data: bytes = b"", repeat: int = 1, ctx: bytes | None = None,
                 data_size_out: int | None = None) -> TestRun:
        """Run the program in the kernel (BPF_PROG_TEST_RUN) on ``data``/``ctx``
        ``repeat`` times; returns ``(retval, data_out, duration_ns, ctx_out)``,
        the duration being the kernel's average per run."""
        return _sys.prog_test_run(self._fd, data, repeat, ctx, data_size_out)

    def pin(self, path: str) -> None:
        """Pin the program on bpffs so that it outlives this process."""
        _sys.obj_pin(path, self._fd)

    # -- introspection
    def info(self) -> ProgInfo:
        """id, tag, sizes, map ids, and run count/time (counted while
        :func:`pyebpf.kernel.enable_stats` is active)."""
        return _sys.prog_info(self._fd)

    def xlated(self) -> list[Insn]:
        """The program as the kernel rewrote it (helper calls resolved, map
        references turned into map ids, inlined lookups, div-by-zero guards)."""
        from .isa import decode
        return decode(_sys.prog_xlated_insns(self._fd))

    def xlated_text(self) -> str:
        """:meth:`xlated` as verifier-style text, map ids shown as map names and
        helper calls by the kernel function they were resolved to."""
        from .isa import encode, opcodes as op
        from .text import format_insn
        insns = self.xlated()
        names = self._map_names_by_id()
        kallsyms = _kernel_symbols() if any(i.code == op.OP_CALL and i.src == 0 for i in insns) else None
        lines = []
        slot = 0
        for insn in insns:
            note = ""
            if insn.code == op.OP_LD_IMM64 and insn.src in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_VALUE):
                mname = names.get(insn.imm, f"id:{insn.imm}")
                text = (f"r{insn.dst} = map[{mname}]" if insn.src == op.PSEUDO_MAP_FD
                        else f"r{insn.dst} = map[{mname}][0]+{insn.next_imm}")
            else:
                try:
                    text = format_insn(insn, dialect="llvm", style="verifier")
                except Exception:
                    text = f"<raw {encode([insn]).hex()}>"
                if insn.code == op.OP_CALL and insn.src == 0 and kallsyms is not None:
                    target = kallsyms.resolve_call(insn.imm)
                    if target:
                        text = f"call {target}#{insn.imm}"
            lines.append(f"{slot:4d}: ({insn.code:02x}) {text}{note}")
            slot += insn.slots
        return "\n".join(lines)

    def _map_names_by_id(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for m in self.maps.values():
            try:
                out[m.info().id] = m.name
            except Exception:
                pass
        return out

    def jited(self) -> bytes:
        """The JIT's machine code."""
        return _sys.prog_jited_insns(self._fd)

    def jited_asm(self) -> str:
        """The JIT's x86-64 code, disassembled with capstone (Intel syntax).
        A jump or call inside the program shows its target as the offset the
        listing's left column uses (``jmp 0x1c``); one out of it, the kernel
        function's name when /proc/kallsyms shows it (``call
        0xffffffff8150e310 <bpf_get_current_pid_tgid>``)."""
        import capstone
        image = _sys.prog_jited(self._fd)
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        base = image.ksyms[0] if image.ksyms else 0
        end = base + len(image.code)
        lines = []
        for ins in md.disasm(image.code, base):
            ops = ins.op_str
            if (ins.mnemonic.startswith("j") or ins.mnemonic == "call") and \
                    ops.startswith("0x") and base:
                target = int(ops, 16)
                if base <= target < end:
                    ops = f"0x{target - base:x}"
                else:
                    name = _kernel_symbols().table.get(target)
                    if name is not None:
                        ops = f"{ops} <{name}>"
            lines.append(f"{ins.address - base:5x}: {ins.bytes.hex():<24} {ins.mnemonic} {ops}".rstrip())
        return "\n".join(lines)


class _KernelSymbols:
    """Just enough of /proc/kallsyms to name resolved helper calls."""

    def __init__(self, table: dict[int, str], call_base: int | None):
        self.table = table
        self.call_base = call_base

    def resolve_call(self, imm: int) -> str | None:
        if self.call_base is None:
            return None
        return self.table.get(self.call_base + imm)


_KSYMS: _KernelSymbols | None = None


def _kernel_symbols() -> _KernelSymbols:
    global _KSYMS
    if _KSYMS is None:
        table: dict[int, str] = {}
        base = None
        try:
            with open("/proc/kallsyms") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) < 3 or parts[1] not in "tTwW":
                        continue
                    addr = int(parts[0], 16)
                    if not addr:
                        continue
                    table.setdefault(addr, parts[2])
                    if parts[2] == "__bpf_call_base":
                        base = addr
        except OSError:
            pass
        _KSYMS = _KernelSymbols(table, base)
    return _KSYMS


# ---------------------------------------------------------------------------

def _as_program(source: "Program | str | bytes | Iterable[Insn]", dialect: str) -> tuple[Program | None, list[Insn]]:
    from .isa import decode
    from .program import Program
    if isinstance(source, Program):
        return source, source.finalize()
    if isinstance(source, str):
        from .text import assemble
        prog = assemble(source, dialect=dialect)
        return prog, prog.finalize()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return None, decode(source)
    insns = list(source)
    return None, insns


def bind_maps(insns: list[Insn], maps: Mapping[str, Any]) -> tuple[list[Insn], list[Any]]:
    """Copies of ``insns`` whose symbolic map references carry real fds.

    Returns the instructions and the map objects used (kept alive by the
    loaded program).  Raises ProgramError naming the line of an unknown map.
    """
    from .isa import opcodes as op
    out: list[Insn] = []
    used: list[Any] = []
    for insn in insns:
        if insn.map_ref is None:
            out.append(insn)
            continue
        m = maps.get(insn.map_ref)
        if m is None:
            known = ", ".join(sorted(maps)) or "none were given"
            raise ProgramError(f"map {insn.map_ref!r} is referenced but not given to load() "
                               f"(maps: {known}); pass maps={{{insn.map_ref!r}: the_map}}",
                               insn.origin)
        new = insn.copy()
        new.imm = m.fd if hasattr(m, "fd") else int(m)
        if new.src == op.PSEUDO_MAP_IDX:
            new.src = op.PSEUDO_MAP_FD
        elif new.src == op.PSEUDO_MAP_IDX_VALUE:
            new.src = op.PSEUDO_MAP_VALUE
        out.append(new)
        if m not in used:
            used.append(m)
    return out, used


def load(source: "Program | str | bytes | Iterable[Insn]", prog_type: "str | int" = "kprobe", *,
         maps: Mapping[str, Any] | None = None, license: str | None = None, name: str | None = None,
         log_level: int = 0, expected_attach_type: int = 0, prog_flags: int = 0,
         check: bool = True, dialect: str = "llvm", btf: bool = True) -> LoadedProgram:
    """Load a program into the kernel.

    Args:
        source: a DSL :class:`Program`, assembly text (``dialect``), raw
            instruction bytes, or instructions.
        prog_type: ``"kprobe"``/``"uprobe"``, ``"tracepoint"``, ``"raw_tracepoint"``,
            ``"perf_event"``, ``"xdp"``, ``"socket_filter"``... or a number.
        maps: map objects by the name the program refers to them with
            (maps passed to the DSL as objects are bound automatically).
        license: defaults to the program's (``"GPL"``).
        log_level: 1 or 2 to keep the verifier's log of a successful load in
            ``.log`` (for learning); failures always carry the log.
        check: run the static helper-argument check first (DSL programs).
        btf: give the kernel BTF with a function record per function and a
            line record per source line (each instruction's origin), so that
            ``bpftool prog dump xlated id N linum`` and the verifier's log show
            the Python or ``.s`` line; loaded without it when the kernel
            refuses it (a :class:`~pyebpf.errors.BtfWarning`, once) or
            ``PYEBPF_BTF=0`` is set.

    Raises:
        VerifierError: the verifier rejected the program; ``.origin`` names
            the source line of the failing instruction.
        ProgramError: a map is missing, or the static check found a mistake.
    """
    ptype = prog_type_of(prog_type)
    program, insns = _as_program(source, dialect)
    all_maps: dict[str, Any] = {}
    if program is not None:
        all_maps.update(program.maps)
    if maps:
        all_maps.update(maps)
    lic = license or (program.license if program is not None else "GPL")
    if check and program is not None:
        from .program.check import check_program
        check_program(insns, license=lic, maps=all_maps)
    bound, used = bind_maps(insns, all_maps)
    pname = name if name is not None else (program.name if program is not None else "")
    from .isa import encode
    try:
        fd, log = _prog_load(ptype, encode(bound), lic, insns, program if btf else False,
                             source if isinstance(source, str) else None,
                             name=pname, log_level=log_level,
                             expected_attach_type=expected_attach_type, prog_flags=prog_flags)
    except VerifierError as exc:
        raise _explain(exc, insns) from None
    return LoadedProgram(fd, ptype, program, insns,
                         {getattr(m, "name", str(i)): m for i, m in enumerate(used)},
                         log, pname, expected_attach_type)


def _prog_load(ptype: int, code: bytes, lic: str, insns: list[Insn],
               program: Program | None | bool, text: str | None,
               **kw: Any) -> tuple[Fd, str]:
    """BPF_PROG_LOAD with the program's own BTF (:func:`_own_btf`) unless
    ``program`` is False; when the kernel refuses the BTF, the program is
    loaded without it (said once)."""
    own = _own_btf(insns, kw["name"], program, text) if program is not False else None
    if own is None:
        return _sys.prog_load(ptype, code, lic, **kw)
    from .kernel import btf as _kbtf
    btf = _kbtf.optional_btf(own.blob)
    if btf is None:
        return _sys.prog_load(ptype, code, lic, **kw)
    try:
        try:
            return _sys.prog_load(ptype, code, lic, btf_fd=btf.fileno(),
                                  func_info=own.func_info, line_info=own.line_info, **kw)
        except VerifierError as exc:
            if _verified(exc.log):
                raise                # the program's own fault, its log shows the source lines
            first: Exception = exc
        except OSError as exc:
            first = exc
        # refused before the verifier ran: the program's own error (if any) is
        # what a load without BTF raises
        out = _sys.prog_load(ptype, code, lic, **kw)
        _kbtf.btf_refused("programs", "the kernel refused the BTF of programs (func_info, "
                          "line_info)", first)
        return out
    finally:
        btf.close()                  # the program holds the BTF now


def _own_btf(insns: list[Insn], name: str, program: Program | None | bool,
             text: str | None) -> Any:
    """The program's func_info/line_info and their BTF
    (:func:`pyebpf.btf.own.program_btf`; ``text``: assembly source given as a
    string), or None when BTF is off (``PYEBPF_BTF=0``), was refused before,
    or cannot be made."""
    from .kernel import btf as _kbtf
    if not _kbtf.own_btf_enabled() or _kbtf.refused("programs"):
        return None
    from .btf.own import SourceLines, program_btf
    from .program import Program
    lines = SourceLines()
    if text is not None:
        lines.add("<string>", text)
    try:
        return program_btf(insns, name, program if isinstance(program, Program) else None, lines)
    except Exception as exc:        # noqa: BLE001 - optional: a fault must not cost the load
        _kbtf.btf_refused("build", "pyebpf could not describe a program (a bug)", exc)
        return None


def _verified(log: str) -> bool:
    """True when the verifier walked the program (it printed an instruction):
    the BTF checks, which come before, passed."""
    import re                 # (a rejection's path: not imported at start-up)
    return re.search(r"^\d+: \([0-9a-f]{2}\) ", log, re.M) is not None


def _explain(exc: VerifierError, insns: list[Insn]) -> VerifierError:
    """The same error, with the failing instruction and its source line."""
    index, text = failing_instruction(exc.log, exc.message)
    origin = None
    if index is not None:
        slot = 0
        for insn in insns:
            if slot <= index < slot + insn.slots:
                origin = insn.origin
                if text is None:
                    try:
                        from .text import format_insn
                        text = format_insn(insn, dialect="llvm", style="verifier")
                    except Exception:
                        text = None
                break
            slot += insn.slots
    shown = None
    if index is not None:
        from .text.disasm import context
        shown = context(insns, index) or None
    new = VerifierError(exc.errno or 0, exc.log, exc.message, index=index, origin=origin,
                        instruction=text, hint=exc.hint, context=shown)
    return new
