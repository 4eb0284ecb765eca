"""Every bpf(2) / perf_event_open(2) wrapper under one name (imported on first use).

The wrappers live in one module per concern; this module lends each of them
its old address, ``pyebpf.kernel.syscall.<name>``, and loads a module only when
one of its names is first asked for (``from .kernel import syscall as _sys``
then ``_sys.map_create`` imports :mod:`.mapops` alone):

* :mod:`.core` -- ``bpf()`` itself, attr sizing, :class:`~.core.Fd`, and the
  conventions every wrapper keeps (its docstring);
* :mod:`.hints` -- errno -> exception class and hint, the verifier's hints (data);
* :mod:`.mapops` -- map creation, element and batch operations;
* :mod:`.prog` -- program loading; :mod:`.testrun` -- test runs;
* :mod:`.objinfo` -- object info records, ids <-> fds, run-time stats;
* :mod:`.links` -- BPF links, raw tracepoints, task fd queries;
* :mod:`.fs` -- bpffs and tracefs mounts, pinning;
* :mod:`.perf` -- perf_event_open, its ioctls and attrs.
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    from .core import (Fd as Fd, attr_size as attr_size, bpf as bpf, new_attr as new_attr,
                       try_bpf as try_bpf)
    from .fs import (BPF_FS_MAGIC as BPF_FS_MAGIC, bpffs_mounted as bpffs_mounted,
                     ensure_bpffs as ensure_bpffs, mount_bpffs as mount_bpffs,
                     mount_tracefs as mount_tracefs, obj_get as obj_get, obj_pin as obj_pin)
    from .hints import (ENOTSUPP as ENOTSUPP, error_for as error_for,
                        verifier_message as verifier_message)
    from .links import (TaskFdQuery as TaskFdQuery, link_create as link_create,
                        link_detach as link_detach, perf_event_link as perf_event_link,
                        raw_tracepoint_open as raw_tracepoint_open,
                        task_fd_query as task_fd_query, uprobe_multi_link as uprobe_multi_link)
    from .mapops import (BatchOps as BatchOps, MapOps as MapOps, map_create as map_create,
                         map_delete as map_delete, map_delete_batch as map_delete_batch,
                         map_freeze as map_freeze, map_get_next_key as map_get_next_key,
                         map_lookup as map_lookup,
                         map_lookup_and_delete as map_lookup_and_delete,
                         map_lookup_batch as map_lookup_batch, map_update as map_update,
                         map_update_batch as map_update_batch)
    from .objinfo import (JitedImage as JitedImage, LinkInfo as LinkInfo, MapInfo as MapInfo,
                          ProgInfo as ProgInfo, UprobeMultiLinkInfo as UprobeMultiLinkInfo,
                          enable_stats as enable_stats, link_get_fd_by_id as link_get_fd_by_id,
                          link_get_next_id as link_get_next_id, link_info as link_info,
                          map_get_fd_by_id as map_get_fd_by_id,
                          map_get_next_id as map_get_next_id, map_info as map_info,
                          obj_get_info_by_fd as obj_get_info_by_fd,
                          prog_get_fd_by_id as prog_get_fd_by_id,
                          prog_get_next_id as prog_get_next_id, prog_info as prog_info,
                          prog_jited as prog_jited, prog_jited_insns as prog_jited_insns,
                          prog_xlated_insns as prog_xlated_insns)
    from .perf import (perf_event_disable as perf_event_disable,
                       perf_event_enable as perf_event_enable, perf_event_id as perf_event_id,
                       perf_event_open as perf_event_open,
                       perf_event_pause_output as perf_event_pause_output,
                       perf_event_reset as perf_event_reset,
                       perf_event_set_bpf as perf_event_set_bpf,
                       perf_event_set_output as perf_event_set_output)
    from .prog import DEFAULT_LOG_SIZE as DEFAULT_LOG_SIZE, prog_load as prog_load
    from .testrun import TestRun as TestRun, prog_test_run as prog_test_run

#: module -> the names it lends to this one
_MODULES = {
    "core": ("Fd", "bpf", "try_bpf", "new_attr", "attr_size"),
    "hints": ("ENOTSUPP", "error_for", "verifier_message"),
    "mapops": ("map_create", "map_lookup", "map_update", "map_delete", "map_get_next_key",
               "map_lookup_and_delete", "map_freeze", "map_lookup_batch", "map_update_batch",
               "map_delete_batch", "MapOps", "BatchOps"),
    "fs": ("obj_pin", "obj_get", "bpffs_mounted", "mount_bpffs", "ensure_bpffs",
           "mount_tracefs", "BPF_FS_MAGIC"),
    "prog": ("prog_load", "DEFAULT_LOG_SIZE"),
    "testrun": ("prog_test_run", "TestRun"),
    "objinfo": ("ProgInfo", "MapInfo", "LinkInfo", "UprobeMultiLinkInfo", "JitedImage",
                "obj_get_info_by_fd", "prog_info", "map_info", "link_info",
                "prog_xlated_insns", "prog_jited", "prog_jited_insns",
                "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id",
                "prog_get_next_id", "map_get_next_id", "link_get_next_id", "enable_stats"),
    "links": ("link_create", "perf_event_link", "uprobe_multi_link", "raw_tracepoint_open",
              "link_detach", "task_fd_query", "TaskFdQuery"),
    "perf": ("perf_event_open", "perf_event_enable", "perf_event_disable",
             "perf_event_reset", "perf_event_set_bpf", "perf_event_set_output",
             "perf_event_pause_output", "perf_event_id"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = list(_HOME)


__getattr__ = lazy_getattr(globals(), _HOME)
__dir__ = lazy_dir(globals(), _HOME)
