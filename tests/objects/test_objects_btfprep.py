"""The object's BTF as loaded (pyebpf.objects.btfprep): patched in place as
libbpf does, it equals type by type what decoding every type and writing the
blob again gives (the way pyebpf did it before), and each fix-up is there."""
from __future__ import annotations

import pytest

from pyebpf.btf import Btf, BtfBuilder, Kind, Type, VarSecinfo
from pyebpf.objects import open_object
from pyebpf.objects.btfprep import prepare_btf
from pyebpf.objects.loading import _hidden_subprograms


def _clone(t: Type, **changes: object) -> Type:
    fields = {name: getattr(t, name) for name in Type._fields if name != "kind"}
    fields.update(changes)
    return Type(t.kind, **fields)


def _rewritten(btf: Btf, section_size, symbol_offset, kconfig_offsets, kconfig_size,
               static_funcs) -> Btf:
    """The reference: every type decoded, fixed up and written again."""
    out = BtfBuilder()
    types = [btf[tid] for tid in btf.ids()]
    int_id = next((i for i, t in enumerate(types, 1)
                   if t.kind == Kind.INT and t.name == "int" and t.size == 4), 0)
    need_int = any(t.kind == Kind.VAR and t.linkage > 1 for t in types)
    if need_int and not int_id:
        int_id = len(types) + 1
    ksym_vars = {v.type for t in types if t.kind == Kind.DATASEC and t.name == ".ksyms"
                 for v in t.secinfo}
    for i, t in enumerate(types, 1):
        if t.kind == Kind.DATASEC and t.name == ".ksyms":
            t = _clone(t, size=max(4 * len(t.secinfo), 4),
                       secinfo=tuple(VarSecinfo(v.type, 4 * n, 4)
                                     for n, v in enumerate(t.secinfo)))
        elif t.kind == Kind.DATASEC and t.name == ".kconfig":
            t = _clone(t, size=max(kconfig_size, 1), secinfo=tuple(
                VarSecinfo(v.type, kconfig_offsets.get(btf[v.type].name, 0), v.size)
                for v in t.secinfo))
        elif t.kind == Kind.DATASEC and section_size(t.name) is not None:
            infos = []
            for v in t.secinfo:
                off = symbol_offset(t.name, btf[v.type].name)
                infos.append(VarSecinfo(v.type, v.offset if off is None else off, v.size))
            t = _clone(t, size=section_size(t.name), secinfo=tuple(infos))
        elif t.kind == Kind.VAR and t.linkage > 1:
            t = _clone(t, linkage=1, ref=int_id if i in ksym_vars else t.ref)
        elif t.kind == Kind.FUNC and t.linkage == 1 and t.name in static_funcs:
            t = _clone(t, linkage=0)
        elif t.kind == Kind.FUNC and t.linkage > 1:
            t = _clone(t, linkage=1)
        out.add(t)
    if need_int and int_id == len(types) + 1:
        out.add_int("int", 4, signed=True)
    return Btf(out.build())


@pytest.mark.parametrize("name", ["multi", "execsnoop", "hidden", "uprobe", "kinds1",
                                  "broken"])
def test_patched_blob_equals_the_rewritten_one(objects, name):
    with open_object(objects[name]) as obj:
        assert obj.btf is not None
        kconfig = {n: v[0] for n, v in obj._kconfig.items()}
        ksize = obj.map_defs[".kconfig"].value_size if ".kconfig" in obj.map_defs else 0
        args = (obj.btf, obj._section_size, obj._symbol_offset, kconfig, ksize,
                _hidden_subprograms(obj))
        prepared = prepare_btf(*args)
        patched = Btf(prepared.blob)
        reference = _rewritten(*args)
        assert len(patched) == len(reference)
        for tid in patched.ids():
            assert patched[tid] == reference[tid], tid
        # what each fix-up must give
        for tid in patched.ids():
            t = patched[tid]
            assert not (t.kind in (Kind.VAR, Kind.FUNC) and t.linkage > 1), t
            if t.kind == Kind.DATASEC and obj.elf.section(t.name) is not None:
                assert t.size == obj.elf.section(t.name).size
        # line_info strings are found in the loaded blob at the offsets given
        for recs in (obj.btf_ext.line_info.values() if obj.btf_ext else ()):
            for r in recs:
                assert patched.string(prepared.string(r.line_text)) == r.line_text
                assert patched.string(prepared.string(r.file_name)) == r.file_name
        if name == "hidden":
            (fid,) = patched.find("fill_answer", Kind.FUNC)
            assert patched[fid].linkage == 0 and obj.btf[fid].linkage == 1
        if name == "multi":
            assert any(t.kind == Kind.DATASEC and t.name == ".kconfig"
                       for t in map(patched.__getitem__, patched.ids()))


def test_a_ksym_without_int_gets_one_appended():
    b = BtfBuilder()
    u8 = b.add_int("unsigned char", 1)
    var = b.add_var("_stext", u8, linkage=2)            # extern
    b.add_datasec(".ksyms", 0, [(var, 0, 1)])
    btf = Btf(b.build())
    prepared = prepare_btf(btf, lambda name: None, lambda sec, name: None, {}, 0)
    out = Btf(prepared.blob)
    assert len(out) == len(btf) + 1
    new = out[len(btf)]
    assert (new.kind, new.name, new.size, new.encoding) == (Kind.INT, "int", 4, 1)
    assert out[var].ref == len(btf) and out[var].linkage == 1
    ksyms = out[out.find(".ksyms")[0]]
    assert ksyms.size == 4 and [(v.offset, v.size) for v in ksyms.secinfo] == [(0, 4)]
