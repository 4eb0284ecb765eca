"""Code generation of integer expressions (part of
:mod:`pyebpf.lang.codegen`): constants, builtins, integer calls, binary
and unary operators, casts, ternaries, string comparisons -- each into a
register of the pool."""
from __future__ import annotations

from ..program import R0, R1, R2, R3, R4, R5, R10, W0, Reg
from . import ast as A
from .builtins import HELPER_BUILTINS, emit_elapsed, emit_helper_builtin, emit_ustack_key
from .codegen_base import CodegenError, _const, _describe, _GenBase, _wrap64, pointee_size, type_of
from .layout import size_align
from .sema_base import param_int
from .types import Type

#: bpftrace's reg() names (pt_regs' field names) -> the 64-bit registers
_BPFTRACE_REGS = {"ip": "rip", "sp": "rsp", "ax": "rax", "bx": "rbx", "cx": "rcx",
                  "dx": "rdx", "si": "rsi", "di": "rdi", "bp": "rbp", "flags": "eflags",
                  "orig_ax": "orig_rax"}



def _no_value(e: A.Expr) -> CodegenError:
    return CodegenError(f"{_describe(e)} has no integer value here", e.pos)


class _IntGen(_GenBase):
    """Integer expressions."""

    #: the method that evaluates each kind of expression into a register (a
    #: constant one is loaded: see :meth:`int_expr`)
    _INT_EXPRS = {
        A.Binop: "binop", A.Unop: "unop", A.Ternary: "ternary", A.Cast: "cast",
        A.FieldAccess: "field_read", A.PositionalParameter: "positional",
        A.ArrayAccess: "index_read"}
    #: the method that reads each of these kinds into a register taken for it
    #: (``method(e, r)``)
    _INT_LOADS = {
        A.Builtin: "builtin", A.Variable: "variable_read", A.Map: "map_read",
        A.Call: "int_call"}

    def int_expr(self, e: A.Expr) -> Reg:
        """Evaluate ``e`` into a register of the pool (release it after use)."""
        c = _const(e)
        if c is not None:
            r = self._need(e.pos)
            self._load_const(r, c)
            return r
        method = self._INT_EXPRS.get(type(e))
        if method is not None:
            return getattr(self, method)(e)  # type: ignore[no-any-return]
        method = self._INT_LOADS.get(type(e))
        if method is None:
            raise _no_value(e)
        r = self._need(e.pos)
        getattr(self, method)(e, r)
        return r

    def ternary(self, e: A.Ternary) -> Reg:
        p = self.p
        els, end = p.fresh_label("telse"), p.fresh_label("tend")
        self.jump_if_false(e.cond, els)
        a = self.int_expr(e.then)
        p.mov(R0, a)
        self.release(a)
        p.ja(end)
        p.label(els)
        b = self.int_expr(e.else_)
        p.mov(R0, b)
        self.release(b)
        p.label(end)
        r = self._need(e.pos)
        p.mov(r, R0)
        return r

    def cast(self, e: A.Cast) -> Reg:
        r = self.int_expr(e.expr)
        t = type_of(e)
        if t.kind == "int" and t.size < 8:
            self._narrow(r, t.size, t.signed)
        return r

    def field_read(self, e: A.FieldAccess) -> Reg:
        """A C struct's member or array's element, a tuple's element
        (``$t.0``), or a tracepoint's field (``args.f``)."""
        t = type_of(e)
        if type_of(e.expr).kind == "tuple" and t.kind in ("int", "pointer"):
            r = self._need(e.pos)
            size = t.size if t.kind == "int" and t.size in (1, 2, 4) else 8
            self.p.load(r, R10, self.element_source(e), size,
                        signed=t.kind == "int" and t.signed and size < 8)
            return r
        if self.located(e):
            return self.element_read(e)
        if not self._is_args(e.expr):
            raise _no_value(e)
        r = self._need(e.pos)
        self._need_source(e, "emit_field").emit_field(self.p, r, e.field, self.ctx_reg)
        return r

    def positional(self, e: A.PositionalParameter) -> Reg:
        """``$N`` (its number: the script is compiled for its parameters) or ``$#``."""
        r = self._need(e.pos)
        if e.count:
            self._load_const(r, len(self.ctx.params))
        else:
            text = self.ctx.params[e.index - 1] if e.index <= len(self.ctx.params) else "0"
            value = param_int(text)         # as the analysis read it (bpftrace's rule)
            if value is None:
                raise CodegenError(f"${e.index} is {text!r}, not an integer", e.pos)
            self._load_const(r, value)
        return r

    def variable_read(self, e: A.Variable, r: Reg) -> None:
        if e.name not in self.vars:
            raise CodegenError(f"${e.name} is used before it is assigned", e.pos)
        off, _ = self.vars[e.name]
        self.p.ldxdw(r, R10, off)

    def _load_const(self, r: Reg, v: int) -> None:
        v = _wrap64(v)
        if -(1 << 31) <= v < (1 << 31):
            self.p.mov(r, v)
        else:
            self.p.lddw(r, v & ((1 << 64) - 1))

    def _narrow(self, r: Reg, size: int, signed: bool) -> None:
        if signed:
            self.p.movsx(r, r, size * 8)
        elif size == 4:
            self.p.mov(r.w, r.w)
        else:
            self.p.and_(r, (1 << (size * 8)) - 1)

    def builtin(self, e: A.Builtin, r: Reg) -> None:
        p = self.p
        n = e.name
        if n in HELPER_BUILTINS:
            emit_helper_builtin(p, n, r)
        elif n == "elapsed":
            emit_elapsed(p, r, self.ctx.start_ns)
        elif n == "curtask":
            p.call("get_current_task")
            p.mov(r, R0)
        elif n == "numaid":
            p.call("get_numa_node_id")
            p.mov(r, R0)
        elif n == "username":                    # the uid, named when printed
            emit_helper_builtin(p, "uid", r)
        elif n == "cpid":
            self._load_const(r, self.ctx.cpid)
        elif n == "func" and self.source is not None and not self.unit_prog_is_raw():
            # bpftrace 0.17 reads the instruction pointer: the function's
            # address in a uprobe, the return address in a uretprobe
            from .. import ptregs
            ptregs.load_reg(p, r, "rip", ctx=self.ctx_reg)
        elif n in ("probe", "func"):
            p.mov(r, self.index)
        elif n == "retval":
            self._need_source(e, "emit_retval").emit_retval(p, r, self.ctx_reg)
        elif n.startswith("sarg") and n[4:].isdigit() and self.source is not None \
                and not self.unit_prog_is_raw():
            # a stack argument: past the return address at the stack pointer
            from .. import ptregs
            ptregs.load_reg(p, r, "rsp", ctx=self.ctx_reg)
            p.add(r, 8 * (int(n[4:]) + 1))
            self._deref(r, Type("int", 8))
        elif n.startswith("arg") and n[3:].isdigit():
            if self.source is None:
                raise CodegenError(f"{n} is not available in {self.kind}", e.pos)
            self.source.emit_arg(p, r, int(n[3:]), self.ctx_reg)
        elif n == "ustack":                      # pid << 32 | stack id
            emit_ustack_key(p, r, self.ctx_reg, self.unit.stacks("ustack"))
        elif n == "pystack":                     # an id of the Python frames
            from .pystack import emit_pystack
            emit_pystack(p, r, self.unit.pystack_maps())
        elif n == "ctx":                         # the probe's context pointer
            p.mov(r, self.ctx_reg)
        elif n == "kstack":
            p.mov(R1, self.ctx_reg)
            p.ld_map(R2, self.unit.stacks("kstack"))
            p.mov(R3, 0)
            p.call("get_stackid")
            p.mov(W0, W0)
            p.mov(r, R0)
        else:
            raise CodegenError(f"builtin {n} is not supported yet", e.pos)

    def _literal(self, e: A.Expr) -> A.String | None:
        """A string literal, or ``str($N)`` as one (its text), else None."""
        if isinstance(e, A.String):
            return e
        text = self.param_text(e) if isinstance(e, A.Call) and e.name == "str" else None
        return None if text is None else A.String(e.pos, text)

    def _user_address(self, name: A.String, pos: A.Pos) -> int:
        """``uaddr("sym")``: the ELF address of a data symbol of the probed
        binary -- not relocated, as bpftrace 0.17 gives it (so in a PIE it is
        the file's address, not the process's)."""
        path = getattr(self.source, "path", None)
        if not path:
            raise CodegenError("uaddr can only be used with uprobes and usdt probes", pos)
        from ..elf import STT_OBJECT, open_elf
        try:
            syms = [s for s in open_elf(path).find_symbols(name.value) if s.type == STT_OBJECT]
        except Exception:
            syms = []
        if not syms:
            raise CodegenError(f"Could not resolve symbol: {path}:{name.value}", pos)
        return int(syms[0].address)

    def int_call(self, e: A.Call, r: Reg) -> None:
        p = self.p
        if e.name == "strncmp":
            a, b, n = e.args
            size = _const(n)
            if size is None:
                raise CodegenError("strncmp needs a constant length", n.pos)
            self.str_compare(a, b, r, size, negate=True, prefix=True)
        elif e.name in ("ustack", "kstack"):
            self.builtin(A.Builtin(e.pos, e.name, type=e.type), r)
        elif e.name == "reg" and e.args and isinstance(e.args[0], A.String):
            if self.source is None or self.unit_prog_is_raw():
                raise CodegenError("reg() needs a probe with registers (uprobe, usdt)", e.pos)
            from .. import ptregs
            name = e.args[0].value
            try:
                ptregs.load_reg(p, r, _BPFTRACE_REGS.get(name, name), ctx=self.ctx_reg)
            except Exception as exc:
                raise CodegenError(f"reg(): {exc}", e.args[0].pos) from None
        elif e.name == "ntop" and type_of(e.args[-1]).kind == "buffer":   # pton()'s 4 bytes
            src = self.bytes_source(e.args[-1], 4)
            p.ldxw(r, R10, src)
        elif e.name == "ntop":                            # an IPv4 address as an integer
            x = self.int_expr(e.args[-1])
            p.mov(r, x)
            p.mov(r.w, r.w)
            self.release(x)
        elif e.name == "bswap" and len(e.args) == 1:
            x = self.int_expr(e.args[0])
            size = type_of(e.args[0]).size if type_of(e.args[0]).kind == "int" else 8
            if size == 1:
                p.and_(x, 0xFF)
            else:
                p.be(x, size * 8)           # (x86 is little-endian: a byte swap)
            p.mov(r, x)
            self.release(x)
        elif e.name == "strcontains" and len(e.args) == 2:
            self.str_contains(e.args[0], e.args[1], r)
        elif e.name == "strftime" and len(e.args) == 2:
            x = self.int_expr(e.args[1])
            p.mov(r, x)
            self.release(x)
        elif e.name in ("kaddr", "uaddr") and e.args and self._literal(e.args[0]) is not None:
            lit = self._literal(e.args[0])
            assert lit is not None
            if e.name == "uaddr":
                self._load_const(r, self._user_address(lit, e.pos))
            else:
                from .stacks import kernel_address
                addr = kernel_address(lit.value)
                if addr is None:
                    raise CodegenError(f"Failed to resolve kernel symbol: {lit.value}",
                                       e.args[0].pos)
                self._load_const(r, addr)
        elif e.name in ("usym", "uaddr", "ksym", "kaddr", "uptr", "kptr", "cgroup_path",
                        "strerror") \
                and e.args:
            x = self.int_expr(e.args[0])
            p.mov(r, x)
            self.release(x)
        else:
            raise CodegenError(f"{e.name}() has no integer value", e.pos)

    def binop(self, e: A.Binop) -> Reg:
        p = self.p
        op = e.op
        lt, rt = type_of(e.left), type_of(e.right)
        if op in ("==", "!=") and lt.kind in ("array", "record") and lt == rt:
            r = self._need(e.pos)
            self.compare_bytes(e.left, e.right, r, negate=op == "!=")
            return r
        if op in ("==", "!=") and (lt.kind == "string" or rt.kind == "string"):
            r = self._need(e.pos)
            size = max(size_align(lt)[0], size_align(rt)[0])
            self.str_compare(e.left, e.right, r, size, negate=op == "!=")
            return r
        if op in ("==", "!=") and lt.kind == rt.kind == "buffer":
            r = self._need(e.pos)           # equal: of one size, every byte the same
            if size_align(lt)[0] != size_align(rt)[0]:
                self._load_const(r, int(op == "!="))
            else:
                self.str_compare(e.left, e.right, r, size_align(lt)[0], negate=op == "!=",
                                 whole=True)
            return r
        if op in ("&&", "||"):
            r = self.int_expr(e.left)
            short, end = p.fresh_label("sc"), p.fresh_label("scend")
            p.jeq(r, 0, short) if op == "&&" else p.jne(r, 0, short)
            self.release(r)
            r2 = self.int_expr(e.right)
            p.mov(R0, 0)
            p.jeq(r2, 0, end)
            p.mov(R0, 1)
            p.ja(end)
            p.label(short)
            p.mov(R0, 0 if op == "&&" else 1)
            p.label(end)
            p.mov(r2, R0)
            return r2
        signed = lt.signed and rt.signed
        left, right, spilled = self._operands(e)
        if "pointer" in (lt.kind, rt.kind) and op in ("+", "-"):
            # C's pointer arithmetic: the integer side counts pointees
            if lt.kind == "pointer":
                right = self._scaled(right, lt)
            else:
                self._apply("*", left, pointee_size(rt), False, e.pos)
        self._apply(op, left, right, signed, e.pos)
        if isinstance(right, int):
            return left
        if spilled:                     # the result goes where the right side is
            p.mov(right, R0)
            return right
        self.release(right)
        return left

    def _scaled(self, n: Reg | int, ptr: Type) -> Reg | int:
        """``n`` times the size of what ``ptr`` points to."""
        size = pointee_size(ptr)
        if isinstance(n, int):
            scaled = _wrap64(n * size)
            if -(1 << 31) <= scaled < (1 << 31):
                return scaled
            r = self._need(A.Pos(0, 0))
            self._load_const(r, scaled)
            return r
        self._apply("*", n, size, False, A.Pos(0, 0))
        return n

    def index_read(self, e: A.ArrayAccess) -> Reg:
        """``a[i]``: an element of a C array (:mod:`~pyebpf.lang.codegen_records`);
        ``p[i]``: the ``i``-th element after the one ``p`` points to."""
        if self.located(e):
            return self.element_read(e)
        pt = type_of(e.expr)
        et = pt.elem
        if pt.kind != "pointer" or et is None or et.kind not in ("int", "pointer"):
            raise _no_value(e)
        r = self.int_expr(e.expr)
        i = _const(e.index)
        if i is not None:
            off = self._scaled(i, pt)
            self._apply("+", r, off, False, e.pos)
            if not isinstance(off, int):
                self.release(off)
        else:
            x = self.int_expr(e.index)
            self._apply("*", x, pointee_size(pt), False, e.pos)
            self.p.add(r, x)
            self.release(x)
        self._deref(r, et)
        return r

    def _deref(self, r: Reg, t: Type) -> None:
        """``r = *(t *)r``: user memory at a uprobe/USDT, memory of either
        where the probe has no address space (``_no_space``), else kernel memory;
        an integer of less than 8 bytes is extended by its sign."""
        p = self.p
        size = t.size if t.kind == "int" and t.size in (1, 2, 4) else 8
        p.mov(R3, r)
        slot = p.stack.alloc(8)
        p.stack_pointer(R1, slot)
        p.mov(R2, size)
        p.call("probe_read_user" if self._user_space() else
               "probe_read" if self._no_space() else "probe_read_kernel")
        p.load(r, R10, slot, size, signed=t.kind == "int" and t.signed and size < 8)

    _ALU = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "&": "and_",
            "|": "or_", "^": "xor", "<<": "lsh"}


    def _apply(self, op: str, dst: Reg, src: Reg | int, signed: bool, pos: A.Pos) -> None:
        p = self.p
        if isinstance(src, int) and src > 0 and src & (src - 1) == 0 and op in ("%", "/", "*"):
            shift = src.bit_length() - 1        # (BPF's / and % are unsigned, as bpftrace's)
            if op == "%":
                p.and_(dst, src - 1)
            elif op == "/":
                if shift:
                    p.rsh(dst, shift)
            elif shift:
                p.lsh(dst, shift)
            return
        if op in self._ALU:
            getattr(p, self._ALU[op])(dst, src)
        elif op == ">>":
            (p.arsh if signed else p.rsh)(dst, src)
        elif op in self._CMP:
            yes, end = p.fresh_label("t"), p.fresh_label("c")
            p.jump_if(self._CMP[op][1 if signed else 0], dst, src, yes)
            p.mov(dst, 0)
            p.ja(end)
            p.label(yes)
            p.mov(dst, 1)
            p.label(end)
        else:
            raise CodegenError(f"operator {op} is not supported", pos)

    def unop(self, e: A.Unop) -> Reg:
        p = self.p
        if e.op in ("++", "--"):
            target = e.operand
            r = self._need(e.pos)
            if isinstance(target, A.Map):
                self.map_incdec(e, r)
                return r
            if isinstance(target, A.Variable) and target.name in self.vars:
                off, _ = self.vars[target.name]
                step = pointee_size(type_of(target)) if type_of(target).kind == "pointer" else 1
                p.ldxdw(r, R10, off)
                p.mov(R1, r)
                p.add(R1, step if e.op == "++" else -step)
                p.stxdw(R10, off, R1)
                if not e.postfix:
                    p.mov(r, R1)
                return r
            raise CodegenError(f"{e.op} needs a variable or a map", e.pos)
        r = self.int_expr(e.operand)
        if e.op == "-":
            p.neg(r)
        elif e.op == "~":
            p.xor(r, -1)
        elif e.op == "!":
            yes, end = p.fresh_label("not"), p.fresh_label("notend")
            p.jeq(r, 0, yes)
            p.mov(r, 0)
            p.ja(end)
            p.label(yes)
            p.mov(r, 1)
            p.label(end)
        elif e.op == "*":                 # user memory at a uprobe/USDT, else kernel memory
            t = type_of(e.operand)
            self._deref(r, t.elem if t.kind == "pointer" and t.elem is not None else t)
        else:
            raise CodegenError(f"operator {e.op} is not supported", e.pos)
        return r

    def str_contains(self, hay: A.Expr, needle: A.Expr, dst: Reg) -> None:
        """``dst = strcontains(hay, needle)``: 1 when the string ``needle``
        is in ``hay`` (an empty needle is in every string). Two literals are
        decided here; else a bounded loop over both strings on the stack."""
        p = self.p
        if isinstance(hay, A.String) and isinstance(needle, A.String):
            self._load_const(dst, int(needle.value in hay.value))
            return
        hs, ns = type_of(hay).size, type_of(needle).size
        h = self.string_source(hay, hs)
        n = self.string_source(needle, ns)
        outer, inner, step, found, done = (p.fresh_label(x) for x in (
            "sc_at", "sc_cmp", "sc_next", "sc_yes", "sc_end"))
        p.mov(dst, 0)
        p.mov(R4, 0)                        # r4: where in hay
        p.label(outer)
        p.jge(R4, hs, done)
        p.mov(R5, 0)                        # r5: where in needle
        p.label(inner)
        p.jge(R5, ns, found)
        p.mov(R1, R10)
        p.add(R1, R5)
        p.ldxb(R2, R1, n)                   # r2 = needle[r5]
        p.jeq(R2, 0, found)
        p.mov(R3, R4)
        p.add(R3, R5)
        p.jge(R3, hs, done)
        p.add(R3, R10)
        p.ldxb(R3, R3, h)                   # r3 = hay[r4 + r5]
        p.jne(R2, R3, step)
        p.add(R5, 1)
        p.ja(inner)
        p.label(step)
        p.jeq(R3, 0, done)                  # hay ended
        p.add(R4, 1)
        p.ja(outer)
        p.label(found)
        p.mov(dst, 1)
        p.label(done)

    def str_compare(self, a: A.Expr, b: A.Expr, dst: Reg, size: int, negate: bool,
                    prefix: bool = False, whole: bool = False) -> None:
        """``dst = (a == b)`` on strings, up to ``size`` bytes (``negate``:
        !=; ``prefix``: equal when the first ``size`` bytes are, strncmp;
        ``whole``: every byte compared, NULs too, as buffers are)."""
        p = self.p
        if isinstance(a, A.String) and not isinstance(b, A.String):
            a, b = b, a
        ta = type_of(a)
        sa = ta.size if ta.kind == "string" else size
        aoff = self.string_source(a, sa)
        diff, end = p.fresh_label("sdiff"), p.fresh_label("send")
        same_value, diff_value = (0, 1) if negate else (1, 0)
        if isinstance(b, A.String):
            lit = b.value.encode() + b"\0"
            for i, ch in enumerate(lit[:min(size, sa)]):
                p.ldxb(R1, R10, aoff + i)
                p.jne(R1, ch, diff)
            if prefix or len(lit) <= min(size, sa):   # (else ``a`` cannot hold it)
                p.mov(dst, same_value)
                p.ja(end)
        else:
            tb = type_of(b)
            sb = tb.size if tb.kind == "string" else size
            boff = self.string_source(b, sb)
            same = p.fresh_label("ssame")
            for i in range(min(size, sa, sb)):
                p.ldxb(R1, R10, aoff + i)
                p.ldxb(R2, R10, boff + i)
                p.jne(R1, R2, diff)
                if not whole:
                    p.jeq(R1, 0, same)
            p.label(same)
            p.mov(dst, same_value)
            p.ja(end)
        p.label(diff)
        p.mov(dst, diff_value)
        p.label(end)

    def string_source(self, e: A.Expr, size: int) -> int:
        if isinstance(e, A.Variable) and e.name in self.vars:
            return self.vars[e.name][0]
        off = self.p.stack.alloc((size + 7) // 8 * 8)
        self.string_into(e, off, size)
        return off

