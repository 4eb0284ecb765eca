"""Code generation of maps (part of :mod:`pyebpf.lang.codegen`): keys
built on the stack, assignments, aggregations by per-CPU adds, reads,
``++``/``--`` of map values."""
from __future__ import annotations

from ..program import R0, R1, R2, R3, R10, Reg
from . import ast as A
from .codegen_base import CodegenError, _GenBase, _stored_value_type, pointee_size
from .layout import size_align, tuple_layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .codegen import MapPlan


class _MapGen(_GenBase):
    """Maps: keys, assignments, aggregations, reads."""

    def plan(self, m: A.Map) -> MapPlan:
        plan = self.unit.maps.get("@" + m.name)
        if plan is None:
            raise CodegenError(f"unknown map @{m.name}", m.pos)
        return plan

    def key(self, m: A.Map, plan: MapPlan, extra: int = 0) -> int:
        """Build ``m``'s key on the stack (``extra`` bytes more after it, for
        a histogram's bucket); return its offset. Only the padding the
        values do not cover is zeroed."""
        p = self.p
        off = p.stack.alloc(plan.key_size + extra)
        if plan.key is None:
            self._zero(off, plan.key_size)
            return off
        if len(m.keys) == 1:
            elems, offsets = [plan.key], [0]
            self.value_into(m.keys[0], off, plan.key)
        else:
            elems, offsets = list(plan.key.elems), tuple_layout(plan.key.elems)[0]
            for k, t, o in zip(m.keys, plan.key.elems, offsets):
                self.value_into(k, off + o, t)
        covered = bytearray(plan.key_size)
        for t, o in zip(elems, offsets):
            size = t.size if t.kind in ("string", "buffer") and not t.counted else \
                size_align(t)[0]
            covered[o:o + size] = b"\1" * size
        pos = 0
        while pos < plan.key_size:
            if covered[pos]:
                pos += 1
                continue
            end = pos
            while end < plan.key_size and not covered[end]:
                end += 1
            self._zero(off + pos, end - pos)
            pos = end
        return off

    def assign_map(self, s: A.AssignMap) -> None:
        plan = self.plan(s.map)
        v = s.value
        if plan.kind != "plain":
            if not (isinstance(v, A.Call) and v.name == plan.kind):
                raise CodegenError(f"@{s.map.name} is a {plan.kind}() map", v.pos)
            self.aggregate(plan, s.map, v)
            return
        key = self.key(s.map, plan)
        vt = _stored_value_type(plan.value)
        val = self.p.stack.alloc(plan.value_size)
        if vt.kind != "int":
            self._zero(val, plan.value_size)
        if s.op is None:
            self.value_into(v, val, vt)
        else:
            r = self.int_expr(A.Binop(s.pos, s.op, s.map, v, type=vt))
            self.p.stxdw(R10, val, r)
            self.release(r)
        self.p.map_update(plan.spec, key, val, flags=0)
        self.check_helper("map_update_elem", s.pos)

    def aggregate(self, plan: MapPlan, m: A.Map, call: A.Call) -> None:
        """``@m[k] = count()/sum(v)/hist(v)/lhist(v, ...)`` by a per-CPU add
        (the trace layer's map layout, so its readers sum the CPUs);
        min/max/avg/stats through :mod:`pyebpf.lang.aggregations`'s emitters."""
        p = self.p
        if plan.kind == "count":
            key = self.key(m, plan)
            self.percpu_add(plan.spec, key, 1)
            return
        if not call.args:
            raise CodegenError(f"{plan.kind}() needs a value", call.pos)
        if plan.kind in ("hist", "lhist") and plan.key is None:
            r = self.int_expr(call.args[0])       # (no key: a per-CPU array of buckets)
            self._bucket(plan, r)
            self.release(r)
            slot = p.stack.alloc(4, 4)
            p.stxw(R10, slot, R1)
            done = p.fresh_label("hist_done")
            p.map_lookup(plan.spec, slot, done)
            self._add_at_r0(1)
            p.label(done)
            return
        if plan.kind in ("hist", "lhist"):
            key = self.key(m, plan, extra=8)
            r = self.int_expr(call.args[0])
            self._bucket(plan, r)
            self.release(r)
            p.stxdw(R10, key + plan.key_size, R1)
            self.percpu_add(plan.spec, key, 1)
            return
        key = self.key(m, plan)
        r = self.int_expr(call.args[0])
        if plan.kind == "sum":
            self.percpu_add(plan.spec, key, r)
        else:
            plan.agg.emit(p, r, key=key)
        self.release(r)

    def _bucket(self, plan: MapPlan, value: Reg) -> None:
        """``r1 = the histogram bucket of value`` (r2, r3 clobbered)."""
        from .aggregations import emit_linear_bucket, emit_log2_bucket
        if plan.kind == "hist":
            emit_log2_bucket(self.p, R1, value, R2, R3)
        else:
            lo, hi, step = plan.agg.linear
            emit_linear_bucket(self.p, R1, value, lo, hi, step, tmp=R2)

    def percpu_add(self, map_: Any, key: int, amount: Reg | int) -> None:
        """This CPU's value under the key at ``r10 + key`` += ``amount`` (an
        immediate or a register of the pool, which survives the calls),
        inserted when absent."""
        p = self.p
        miss, done = p.fresh_label("add_miss"), p.fresh_label("add_done")
        p.map_lookup(map_, key, miss)
        self._add_at_r0(amount)
        p.ja(done)
        p.label(miss)
        val = p.stack.alloc(8)
        p.store(R10, val, amount, 8)
        p.map_update(map_, key, val, flags=1)          # BPF_NOEXIST
        p.label(done)

    def _add_at_r0(self, amount: Reg | int) -> None:
        """``*(u64 *)r0 += amount`` as one atomic add (the value is this
        CPU's, so a plain load/add/store would do; the atomic add is two
        instructions fewer for a few nanoseconds more, and the kernel runs
        fewer instructions than bpftrace's for the same script)."""
        p = self.p
        if isinstance(amount, int):
            p.mov(R1, amount)
            amount = R1
        p.atomic_add(R0, 0, amount)

    def map_read(self, m: A.Map, dst: Reg, pos: A.Pos | None = None) -> None:
        """``dst = @m[k]`` (0 when absent) for an integer map; ``pos``: where
        a failed lookup is reported (-kk; default the map's)."""
        plan = self.plan(m)
        p = self.p
        key = self.key(m, plan)
        if plan.kind not in ("plain", "count", "sum", "min", "max"):
            article = "an" if plan.kind in ("avg", "lhist") else "a"
            raise CodegenError(f"the value of {article} {plan.kind}() map cannot be read in a "
                               "probe", m.pos)
        miss, done = p.fresh_label("miss"), p.fresh_label("got")
        p.map_lookup(plan.spec, key, miss)
        p.ldxdw(dst, R0, 0)
        p.ja(done)
        p.label(miss)
        self.check_helper("map_lookup_elem", pos or m.pos, 2, null=True)
        p.mov(dst, 0)
        p.label(done)

    def map_incdec(self, e: A.Unop, dst: Reg) -> None:
        m = e.operand
        assert isinstance(m, A.Map)
        plan = self.plan(m)
        p = self.p
        self.map_read(m, dst, e.pos)
        key = self.key(m, plan)
        val = p.stack.alloc(8)
        t = plan.value
        step = pointee_size(t) if t is not None and t.kind == "pointer" else 1
        p.mov(R1, dst)
        p.add(R1, step if e.op == "++" else -step)
        p.stxdw(R10, val, R1)
        if not e.postfix:
            p.mov(dst, R1)
        p.map_update(plan.spec, key, val, flags=0)
        self.check_helper("map_update_elem", e.pos)
