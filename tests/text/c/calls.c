/* bpf-to-bpf calls, legacy packet loads (LD_ABS/LD_IND), stack stores, loops. No headers. */
typedef unsigned long long u64; typedef unsigned int u32;
#define SEC(name) __attribute__((section(name), used))
unsigned long long load_byte(void *skb, unsigned long long off) asm("llvm.bpf.load.byte");
unsigned long long load_half(void *skb, unsigned long long off) asm("llvm.bpf.load.half");
unsigned long long load_word(void *skb, unsigned long long off) asm("llvm.bpf.load.word");
static long (*bpf_trace_printk)(const char *fmt, u32 fmt_size, ...) = (void *) 6;

static __attribute__((noinline)) int sub(int a, int b) { return a * 3 + b; }
static __attribute__((noinline)) int fib(int n)
{
    int a = 0, b = 1;
    for (int i = 0; i < n && i < 40; i++) {
        int t = a + b;
        a = b;
        b = t;
    }
    return a;
}

SEC("socket")
int ldabs(void *skb)
{
    u32 proto = load_half(skb, 12);
    u32 ihl = load_byte(skb, 14) & 0xf;
    u32 w = load_word(skb, ihl * 4);
    return sub(proto, w) + ihl + fib(ihl);
}

SEC("tc")
int stack(void *skb)
{
    volatile u64 a = 5; volatile u32 b = 7; volatile unsigned short c = 9; volatile unsigned char d = 1;
    char fmt[] = "x=%d\n";
    bpf_trace_printk(fmt, sizeof(fmt), a + b);
    return a + b + c + d + sub(a, b);
}

char LICENSE[] SEC("license") = "GPL";
