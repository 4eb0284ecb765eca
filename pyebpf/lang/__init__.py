"""The bpftrace language, compiled in pure Python.

Passes over one tree (:mod:`~pyebpf.lang.ast`): the lexer and parser build
it, the semantic pass types it, code generation turns each probe into eBPF
through the DSL, and the runtime loads, attaches and prints as bpftrace does.
"""
