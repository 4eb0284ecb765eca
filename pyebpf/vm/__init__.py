"""An eBPF virtual machine in pure Python: run programs with no kernel and no privilege.

:class:`Vm` runs a :class:`~pyebpf.program.Program`, a list of instructions or
raw bytes with the kernel's semantics (:mod:`pyebpf.vm.semantics` is the table
of what each opcode does), checked memory (:mod:`pyebpf.vm.memory`),
bpf-to-bpf calls, tail calls (from subprograms too) and emulated helpers
(:mod:`pyebpf.vm.helpers`) over in-VM maps (:class:`VmMap`).  A run that goes
wrong stops with a :class:`VmError` naming the instruction and the line that
wrote it.  Events go to rings laid out as the kernel's, read by the same
classes: ``PerfBuffer(vm.maps["events"])``, ``RingBufferReader(vm.maps["rb"])``.
``pyebpf vm run`` runs the ``asm/`` files with the maps their header declares
(:mod:`pyebpf.cli.vm_asm`).

:func:`pyebpf.vm.conformance.run_test` runs a bpf_conformance ``.data`` test;
:mod:`pyebpf.vm.debugger` steps through a program (``pyebpf vm step``).
"""
from __future__ import annotations

from .errors import VmError
from .machine import Step, Vm
from .maps import VmMap

__all__ = ["Vm", "VmError", "VmMap", "Step"]
