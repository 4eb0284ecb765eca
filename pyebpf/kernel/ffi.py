"""The one cffi declaration of everything pyebpf needs from the kernel and libc.

ABI mode only: ``cffi.FFI().dlopen(None)`` binds the already-loaded C library,
so no compiler and no kernel headers are needed.  The layouts below follow the
UAPI headers (``linux/bpf.h``, ``linux/perf_event.h``) for x86_64/arm64 LP64;
``tests/kernel/test_ffi.py`` checks every offset against the project's
reference (``shared/reference/kernel-uapi.md``).

Unlike the C header, the per-command structs of ``union bpf_attr`` are *named*
members here (``attr.map_create.key_size``, ``attr.elem.key``,
``attr.prog_load.log_buf`` ...): the layout is identical, the names never
collide, and :func:`offsetofend` can size each command's attr to its last
field the way libbpf does.

Start-up: parsing this declaration with cffi (and pycparser) costs ~70 ms,
most of a short tracer's start.  So the parsed form is kept in the generated
module ``_ffi_abi.py`` (cffi's out-of-line ABI mode: pure Python, still no
compiler), which imports in ~2 ms.  It records a digest of ``CDEF``; when
the two disagree (``CDEF`` was edited), this module falls back to parsing at
import and ``tests/kernel/test_ffi.py`` fails until the file is regenerated
with ``python -m pyebpf.kernel.ffi --regenerate``.

Exports: ``ffi``, ``lib`` (libc: ``syscall``, ``ioctl``, ``mount``),
:func:`offsetofend`, and the function pointers ``sys_bpf`` /
``sys_perf_event_open`` (``syscall`` re-typed as a non-variadic function, which
is both faster to call and identical in ABI on x86_64 and arm64 Linux for
integer/pointer arguments).
"""
from __future__ import annotations

import os
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    #: A cffi object (``ffi.new``/``ffi.cast`` result); cffi ships no type information.
    CData = Any

__all__ = ["ffi", "lib", "offsetofend", "sys_bpf", "sys_perf_event_open",
           "NR_BPF", "NR_PERF_EVENT_OPEN", "NR_PRCTL", "CDEF"]

CDEF = r"""
/* ---------------------------------------------------------------- libc */
long syscall(long number, ...);
int ioctl(int fd, unsigned long request, ...);
int mount(const char *source, const char *target, const char *filesystemtype,
          unsigned long mountflags, const void *data);

/* ---------------------------------------------------------- union bpf_attr */
struct bpf_attr_map_create {            /* BPF_MAP_CREATE */
    uint32_t map_type;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t max_entries;
    uint32_t map_flags;
    uint32_t inner_map_fd;
    uint32_t numa_node;
    char     map_name[16];
    uint32_t map_ifindex;
    uint32_t btf_fd;
    uint32_t btf_key_type_id;
    uint32_t btf_value_type_id;
    uint32_t btf_vmlinux_value_type_id;
    uint64_t map_extra;
    int32_t  value_type_btf_obj_fd;
    int32_t  map_token_fd;
    uint64_t excl_prog_hash;
    uint32_t excl_prog_hash_size;
};

struct bpf_attr_elem {                  /* BPF_MAP_*_ELEM, BPF_MAP_FREEZE */
    uint32_t map_fd;
    uint32_t _pad0;
    uint64_t key;
    union {
        uint64_t value;
        uint64_t next_key;
    };
    uint64_t flags;
};

struct bpf_attr_batch {                 /* BPF_MAP_*_BATCH */
    uint64_t in_batch;
    uint64_t out_batch;
    uint64_t keys;
    uint64_t values;
    uint32_t count;
    uint32_t map_fd;
    uint64_t elem_flags;
    uint64_t flags;
};

struct bpf_attr_prog_load {             /* BPF_PROG_LOAD */
    uint32_t prog_type;
    uint32_t insn_cnt;
    uint64_t insns;
    uint64_t license;
    uint32_t log_level;
    uint32_t log_size;
    uint64_t log_buf;
    uint32_t kern_version;
    uint32_t prog_flags;
    char     prog_name[16];
    uint32_t prog_ifindex;
    uint32_t expected_attach_type;
    uint32_t prog_btf_fd;
    uint32_t func_info_rec_size;
    uint64_t func_info;
    uint32_t func_info_cnt;
    uint32_t line_info_rec_size;
    uint64_t line_info;
    uint32_t line_info_cnt;
    uint32_t attach_btf_id;
    union {
        uint32_t attach_prog_fd;
        uint32_t attach_btf_obj_fd;
    };
    uint32_t core_relo_cnt;
    uint64_t fd_array;
    uint64_t core_relos;
    uint32_t core_relo_rec_size;
    uint32_t log_true_size;
    int32_t  prog_token_fd;
    uint32_t fd_array_cnt;
    uint64_t signature;
    uint32_t signature_size;
    int32_t  keyring_id;
};

struct bpf_attr_obj {                   /* BPF_OBJ_PIN, BPF_OBJ_GET */
    uint64_t pathname;
    uint32_t bpf_fd;
    uint32_t file_flags;
    int32_t  path_fd;
};

struct bpf_attr_prog_attach {           /* BPF_PROG_ATTACH / DETACH */
    uint32_t target_fd;
    uint32_t attach_bpf_fd;
    uint32_t attach_type;
    uint32_t attach_flags;
    uint32_t replace_bpf_fd;
    uint32_t relative_fd;
    uint64_t expected_revision;
};

struct bpf_attr_test {                  /* BPF_PROG_TEST_RUN */
    uint32_t prog_fd;
    uint32_t retval;
    uint32_t data_size_in;
    uint32_t data_size_out;
    uint64_t data_in;
    uint64_t data_out;
    uint32_t repeat;
    uint32_t duration;
    uint32_t ctx_size_in;
    uint32_t ctx_size_out;
    uint64_t ctx_in;
    uint64_t ctx_out;
    uint32_t flags;
    uint32_t cpu;
    uint32_t batch_size;
};

struct bpf_attr_get_id {                /* BPF_*_GET_*_ID, BPF_*_GET_FD_BY_ID */
    union {
        uint32_t start_id;
        uint32_t prog_id;
        uint32_t map_id;
        uint32_t btf_id;
        uint32_t link_id;
    };
    uint32_t next_id;
    uint32_t open_flags;
    int32_t  fd_by_id_token_fd;
};

struct bpf_attr_info {                  /* BPF_OBJ_GET_INFO_BY_FD */
    uint32_t bpf_fd;
    uint32_t info_len;
    uint64_t info;
};

struct bpf_attr_raw_tracepoint {        /* BPF_RAW_TRACEPOINT_OPEN */
    uint64_t name;
    uint32_t prog_fd;
    uint32_t _pad0;
    uint64_t cookie;
};

struct bpf_attr_task_fd_query {         /* BPF_TASK_FD_QUERY */
    uint32_t pid;
    uint32_t fd;
    uint32_t flags;
    uint32_t buf_len;
    uint64_t buf;
    uint32_t prog_id;
    uint32_t fd_type;
    uint64_t probe_offset;
    uint64_t probe_addr;
};

struct bpf_attr_link_create {           /* BPF_LINK_CREATE */
    union {
        uint32_t prog_fd;
        uint32_t map_fd;
    };
    union {
        uint32_t target_fd;
        uint32_t target_ifindex;
    };
    uint32_t attach_type;
    uint32_t flags;
    union {
        uint32_t target_btf_id;
        struct {
            uint64_t bpf_cookie;
        } perf_event;
        struct {
            uint32_t flags;
            uint32_t cnt;
            uint64_t syms;
            uint64_t addrs;
            uint64_t cookies;
        } kprobe_multi;
        struct {
            uint64_t path;
            uint64_t offsets;
            uint64_t ref_ctr_offsets;
            uint64_t cookies;
            uint32_t cnt;
            uint32_t flags;
            uint32_t pid;
            uint32_t path_fd;
        } uprobe_multi;
    };
};

struct bpf_attr_link_detach {           /* BPF_LINK_DETACH */
    uint32_t link_fd;
};

struct bpf_attr_enable_stats {          /* BPF_ENABLE_STATS */
    uint32_t type;
};

struct bpf_attr_prog_bind_map {         /* BPF_PROG_BIND_MAP */
    uint32_t prog_fd;
    uint32_t map_fd;
    uint32_t flags;
};

union bpf_attr {
    struct bpf_attr_map_create      map_create;
    struct bpf_attr_elem            elem;
    struct bpf_attr_batch           batch;
    struct bpf_attr_prog_load       prog_load;
    struct bpf_attr_obj             obj;
    struct bpf_attr_prog_attach     prog_attach;
    struct bpf_attr_test            test;
    struct bpf_attr_get_id          get_id;
    struct bpf_attr_info            info;
    struct bpf_attr_raw_tracepoint  raw_tracepoint;
    struct bpf_attr_task_fd_query   task_fd_query;
    struct bpf_attr_link_create     link_create;
    struct bpf_attr_link_detach     link_detach;
    struct bpf_attr_enable_stats    enable_stats;
    struct bpf_attr_prog_bind_map   prog_bind_map;
    uint64_t                        _align;
};

/* ------------------------------------------------------ info structures */
struct bpf_prog_info {
    uint32_t type;
    uint32_t id;
    uint8_t  tag[8];
    uint32_t jited_prog_len;
    uint32_t xlated_prog_len;
    uint64_t jited_prog_insns;
    uint64_t xlated_prog_insns;
    uint64_t load_time;                 /* ns since boot */
    uint32_t created_by_uid;
    uint32_t nr_map_ids;
    uint64_t map_ids;
    char     name[16];
    uint32_t ifindex;
    uint32_t gpl_compatible;            /* bit 0; bits 1..31 are padding */
    uint64_t netns_dev;
    uint64_t netns_ino;
    uint32_t nr_jited_ksyms;
    uint32_t nr_jited_func_lens;
    uint64_t jited_ksyms;
    uint64_t jited_func_lens;
    uint32_t btf_id;
    uint32_t func_info_rec_size;
    uint64_t func_info;
    uint32_t nr_func_info;
    uint32_t nr_line_info;
    uint64_t line_info;
    uint64_t jited_line_info;
    uint32_t nr_jited_line_info;
    uint32_t line_info_rec_size;
    uint32_t jited_line_info_rec_size;
    uint32_t nr_prog_tags;
    uint64_t prog_tags;
    uint64_t run_time_ns;
    uint64_t run_cnt;
    uint64_t recursion_misses;
    uint32_t verified_insns;
    uint32_t attach_btf_obj_id;
    uint32_t attach_btf_id;
    uint32_t _pad0;
};

struct bpf_map_info {
    uint32_t type;
    uint32_t id;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t max_entries;
    uint32_t map_flags;
    char     name[16];
    uint32_t ifindex;
    uint32_t btf_vmlinux_value_type_id;
    uint64_t netns_dev;
    uint64_t netns_ino;
    uint32_t btf_id;
    uint32_t btf_key_type_id;
    uint32_t btf_value_type_id;
    uint32_t btf_vmlinux_id;
    uint64_t map_extra;
    uint64_t hash;
    uint32_t hash_size;
    uint32_t _pad0;
};

struct bpf_link_info {
    uint32_t type;
    uint32_t id;
    uint32_t prog_id;
    uint32_t _pad0;
    union {
        struct {
            uint64_t tp_name;
            uint32_t tp_name_len;
            uint32_t _pad0;
            uint64_t cookie;
        } raw_tracepoint;
        struct {
            uint64_t path;
            uint64_t offsets;
            uint64_t ref_ctr_offsets;
            uint64_t cookies;
            uint32_t path_size;
            uint32_t count;
            uint32_t flags;
            uint32_t pid;
        } uprobe_multi;
        struct {
            uint32_t type;
            uint32_t _pad0;
            union {
                struct {
                    uint64_t file_name;
                    uint32_t name_len;
                    uint32_t offset;
                    uint64_t cookie;
                    uint64_t ref_ctr_offset;
                } uprobe;
                struct {
                    uint64_t func_name;
                    uint32_t name_len;
                    uint32_t offset;
                    uint64_t addr;
                    uint64_t missed;
                    uint64_t cookie;
                } kprobe;
                struct {
                    uint64_t tp_name;
                    uint32_t name_len;
                    uint32_t _pad1;
                    uint64_t cookie;
                } tracepoint;
                struct {
                    uint64_t config;
                    uint32_t type;
                    uint32_t _pad1;
                    uint64_t cookie;
                } event;
            };
        } perf_event;
    };
};

/* ------------------------------------------------------------ perf events */
struct perf_event_attr {
    uint32_t type;
    uint32_t size;
    uint64_t config;
    union {
        uint64_t sample_period;
        uint64_t sample_freq;
    };
    uint64_t sample_type;
    uint64_t read_format;
    uint64_t flags;                     /* the C bitfield, as one u64 */
    union {
        uint32_t wakeup_events;
        uint32_t wakeup_watermark;
    };
    uint32_t bp_type;
    union {
        uint64_t bp_addr;
        uint64_t kprobe_func;
        uint64_t uprobe_path;
        uint64_t config1;
    };
    union {
        uint64_t bp_len;
        uint64_t kprobe_addr;
        uint64_t probe_offset;
        uint64_t config2;
    };
    uint64_t branch_sample_type;
    uint64_t sample_regs_user;
    uint32_t sample_stack_user;
    int32_t  clockid;
    uint64_t sample_regs_intr;
    uint32_t aux_watermark;
    uint16_t sample_max_stack;
    uint16_t _reserved_2;
    uint32_t aux_sample_size;
    uint32_t aux_action;
    uint64_t sig_data;
    uint64_t config3;
    uint64_t config4;
};

struct perf_event_mmap_page {
    uint32_t version;
    uint32_t compat_version;
    uint32_t lock;
    uint32_t index;
    int64_t  offset;
    uint64_t time_enabled;
    uint64_t time_running;
    uint64_t capabilities;
    uint16_t pmc_width;
    uint16_t time_shift;
    uint32_t time_mult;
    uint64_t time_offset;
    uint64_t time_zero;
    uint32_t size;
    uint32_t _reserved_1;
    uint64_t time_cycles;
    uint64_t time_mask;
    uint8_t  _reserved[928];
    uint64_t data_head;
    uint64_t data_tail;
    uint64_t data_offset;
    uint64_t data_size;
    uint64_t aux_head;
    uint64_t aux_tail;
    uint64_t aux_offset;
    uint64_t aux_size;
};

struct perf_event_header {
    uint32_t type;
    uint16_t misc;
    uint16_t size;
};
"""

#: identifies CDEF's text (crc32 + length: zlib is built in, hashlib costs ~4 ms to import)
CDEF_DIGEST = f"{zlib.crc32(CDEF.encode()):08x}-{len(CDEF)}"
_GENERATED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ffi_abi.py")


def _parsed_ffi() -> Any:
    """An FFI with CDEF parsed now (slow path: cffi + pycparser)."""
    import cffi
    parsed = cffi.FFI()
    parsed.cdef(CDEF)
    return parsed


def regenerate(path: str = _GENERATED) -> None:
    """Write the out-of-line ABI module for the current CDEF."""
    import cffi
    builder = cffi.FFI()
    builder.cdef(CDEF)
    builder.set_source("pyebpf.kernel._ffi_abi", None)
    builder.emit_python_code(path)
    with open(path, "a") as fh:
        fh.write(f"\nCDEF_DIGEST = {CDEF_DIGEST!r}  # of pyebpf.kernel.ffi.CDEF\n")


def _load_ffi() -> Any:
    try:
        from . import _ffi_abi
    except ImportError:
        return _parsed_ffi()
    if getattr(_ffi_abi, "CDEF_DIGEST", None) != CDEF_DIGEST:
        return _parsed_ffi()      # stale: CDEF changed since the module was generated
    return _ffi_abi.ffi


ffi = _load_ffi()
lib = ffi.dlopen(None)

_MACHINE = os.uname().machine
if _MACHINE in ("x86_64", "AMD64"):
    NR_BPF, NR_PERF_EVENT_OPEN, NR_PRCTL = 321, 298, 157
elif _MACHINE in ("aarch64", "arm64", "riscv64", "loongarch64"):   # the generic table
    NR_BPF, NR_PERF_EVENT_OPEN, NR_PRCTL = 280, 241, 167
else:  # pragma: no cover - other architectures are not supported yet
    raise ImportError(f"pyebpf: unsupported architecture {_MACHINE!r} "
                      "(known: x86_64, aarch64, riscv64, loongarch64)")

_syscall_addr = ffi.addressof(lib, "syscall")
#: ``long bpf(long nr, long cmd, void *attr, unsigned long size)`` via syscall(2).
sys_bpf = ffi.cast("long(*)(long, long, void *, unsigned long)", _syscall_addr)
#: ``long perf_event_open(long nr, void *attr, long pid, long cpu, long group_fd,
#: unsigned long flags)`` via syscall(2).
sys_perf_event_open = ffi.cast(
    "long(*)(long, void *, long, long, long, unsigned long)", _syscall_addr)
#: ``int ioctl(int fd, unsigned long request, unsigned long arg)``.
sys_ioctl = ffi.cast("int(*)(int, unsigned long, unsigned long)",
                     ffi.addressof(lib, "ioctl"))


def offsetofend(ctype: str, *fields: str) -> int:
    """Offset of the first byte after ``ctype.fields`` (libbpf's ``offsetofend``).

    ``offsetofend("union bpf_attr", "prog_load", "log_true_size") == 144``.
    """
    off: int = ffi.offsetof(ctype, *fields)
    t = ffi.typeof(ctype)
    for name in fields:
        while t.kind == "pointer":  # pragma: no cover - defensive
            t = t.item
        t = dict(t.fields)[name].type
    size: int = ffi.sizeof(t)
    return off + size


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    if sys.argv[1:] == ["--regenerate"]:
        regenerate()
        print(f"wrote {_GENERATED}")
    else:
        print("usage: python -m pyebpf.kernel.ffi --regenerate", file=sys.stderr)
        sys.exit(2)
