/* Maps (BTF-style .maps and a legacy "maps" definition), helpers declared as
 * numbered function pointers, global data (.bss/.data/.rodata), atomics with
 * and without fetch, 32- and 64-bit. No headers. */
typedef unsigned long long u64; typedef unsigned int u32;
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *) 1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, u64 flags) = (void *) 2;
static u64 (*bpf_ktime_get_ns)(void) = (void *) 5;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *) 14;
static long (*bpf_get_current_comm)(void *buf, u32 size) = (void *) 16;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, u64 size, u64 flags) = (void *) 131;
static void (*bpf_ringbuf_submit)(void *data, u64 flags) = (void *) 132;
static long (*bpf_tail_call)(void *ctx, void *prog_array_map, u32 index) = (void *) 12;

struct {
    __uint(type, 1);            /* BPF_MAP_TYPE_HASH */
    __uint(max_entries, 128);
    __type(key, u32);
    __type(value, u64);
} counts SEC(".maps");

struct {
    __uint(type, 27);           /* BPF_MAP_TYPE_RINGBUF */
    __uint(max_entries, 4096);
} rb SEC(".maps");

struct bpf_map_def { u32 type, key_size, value_size, max_entries, map_flags; };
struct bpf_map_def jt SEC("maps") = { .type = 3, .key_size = 4, .value_size = 4, .max_entries = 4 };

u64 global_counter = 0;
u64 global_init = 42;
u32 g32;
const volatile u32 cfg = 7;

struct event { u32 pid; u64 ts; char comm[16]; };

SEC("tracepoint/syscalls/sys_enter_write")
int tp(void *ctx)
{
    u32 key = bpf_get_current_pid_tgid() >> 32;
    u64 one = 1, *v;
    v = bpf_map_lookup_elem(&counts, &key);
    if (v)
        __sync_fetch_and_add(v, 1);
    else
        bpf_map_update_elem(&counts, &key, &one, 0);
    __sync_fetch_and_add(&global_counter, cfg);
    global_init += 1;
    struct event *e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
    if (!e)
        return 0;
    e->pid = key;
    e->ts = bpf_ktime_get_ns();
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    bpf_ringbuf_submit(e, 0);
    bpf_tail_call(ctx, &jt, 0);
    return 0;
}

SEC("socket")
int atom(void *skb)
{
    u64 v = *(u32 *)skb;
    __sync_fetch_and_add(&global_counter, v);
    u64 old = __sync_fetch_and_add(&global_counter, 2);
    old += __sync_fetch_and_and(&global_counter, v);
    old += __sync_fetch_and_or(&global_counter, v);
    old += __sync_fetch_and_xor(&global_counter, v);
    old += __sync_lock_test_and_set(&global_counter, v);
    old += __sync_val_compare_and_swap(&global_counter, v, 5);
    u32 o32 = __sync_fetch_and_add(&g32, 1);
    o32 += __sync_fetch_and_or(&g32, 2);
    __sync_fetch_and_and(&g32, 3);
    __sync_fetch_and_xor(&g32, 4);
    __sync_fetch_and_add(&g32, 5);
    o32 += __sync_lock_test_and_set(&g32, 9);
    o32 += __sync_val_compare_and_swap(&g32, 1, 2);
    return old + o32;
}

char LICENSE[] SEC("license") = "GPL";
