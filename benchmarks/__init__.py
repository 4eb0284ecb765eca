"""Benchmarks of pyebpf (and, for the comparison cases, bpftrace and BCC).

Each ``bench_*.py`` module has ``run(quick=False) -> dict`` returning its
measurements; ``python -m benchmarks [--quick] [NAME...]`` runs them.
"""
