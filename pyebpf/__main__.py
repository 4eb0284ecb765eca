"""``python -m pyebpf``: the command line (see :mod:`pyebpf.cli`)."""
import os

try:
    from .cli import entry
except KeyboardInterrupt:          # Ctrl-C before the command line could take it
    os._exit(130)
entry()
