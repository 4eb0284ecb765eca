"""Clang-built BPF objects loaded in pure Python (libbpf's job, without libbpf)::

    obj = pyebpf.open_object("execsnoop.bpf.o")
    obj.globals["targ_tgid"] = 1234         # const volatile settings, before load
    with obj.load():
        obj.programs["handle_execve"].attach()   # by its SEC("...") name
        ring = obj.maps["events"]                # a pyebpf map: readers work on it

* :func:`open_object` / :func:`load_object`, :class:`BpfObject`
  (programs, maps, globals, externs; a context manager owning all of it)
* :mod:`.sections` -- program types from section names, as libbpf maps them
  (leniently, as libbpf 0.x: ``xdp/NAME``, ``classifier/NAME``,
  ``perf_event/...`` are taken, and the program's ``lenient_section`` says
  so; ``open_object(path, strict_sections=True)`` refuses them, as libbpf 1.x)
* :mod:`.maps` -- BTF-defined and legacy maps, global data sections
* :mod:`.link` -- bpf-to-bpf calls and callbacks linked per program
* :mod:`.loading` -- the load itself: BTF, maps, externs, CO-RE, programs,
  then the prog arrays an initializer fills (``.values = { [0] = &prog }``)
* :mod:`.btfprep` -- the object's BTF fixed up for the kernel (clang's
  leftovers; what this kernel lacks, from BTF-kind probes)
* :mod:`.infos` -- func_info and line_info per program
* :mod:`.usdt` -- libbpf's USDT protocol (``bpf/usdt.bpf.h``):
  ``obj.programs[name].attach_usdt(binary, provider, name, pid=, cookie=)``
"""
from __future__ import annotations

from .errors import ObjectError, ObjectFileError
from .obj import BpfObject, Globals, ObjectProgram, load_object, open_object

__all__ = ["open_object", "load_object", "BpfObject", "ObjectProgram", "Globals",
           "ObjectError", "ObjectFileError"]
