"""C++ names demangled without binutils' c++filt (libstdc++'s own demangler)."""
from __future__ import annotations

from pyebpf.symbols import stacks


def test_demangles_without_cxxfilt(monkeypatch):
    monkeypatch.setattr(stacks.shutil, "which", lambda name: None)   # no c++filt anywhere
    monkeypatch.setattr(stacks, "_demangled", {})
    names = ["_ZN2ns4workEv", "_ZNSt6vectorIiSaIiEE9push_backERKi", "_Z4spinmm", "main",
             "_Znot_mangled!"]
    got = stacks.demangle(names)
    assert got == {"_ZN2ns4workEv": "ns::work()",
                   "_ZNSt6vectorIiSaIiEE9push_backERKi":
                       "std::vector<int, std::allocator<int> >::push_back(int const&)",
                   "_Z4spinmm": "spin(unsigned long, unsigned long)",
                   "main": "main", "_Znot_mangled!": "_Znot_mangled!"}
