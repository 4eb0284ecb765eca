/* ALU64/ALU32, byte swaps, JMP/JMP32 compares (clang -target bpf -O2 -mcpu=v3). No headers. */
typedef unsigned long long u64; typedef unsigned int u32; typedef long long s64; typedef int s32;
typedef unsigned short u16;
#define SEC(name) __attribute__((section(name), used))

__attribute__((noinline)) u64 alu64(u64 a, u64 b, s64 c)
{
    u64 r = a + b;
    r -= 7; r *= b; r /= (b | 1); r %= (a | 3);
    r |= 0x10; r &= 0xfff0; r ^= a; r <<= (b & 63); r >>= 3;
    r += (u64)(c >> 5);
    r += (u64)(-c);
    r += 0x123456789abcdefULL;
    return r;
}

__attribute__((noinline)) u32 alu32(u32 a, u32 b, s32 c)
{
    u32 r = a + b;
    r -= 7; r *= b; r /= (b | 1); r %= (a | 3);
    r |= 0x10; r &= 0xfff0; r ^= a; r <<= (b & 31); r >>= 3;
    return r + (u32)(c >> 5) + (u32)(-c) + 0x80000000u;
}

__attribute__((noinline)) u64 endian(u64 x, u32 y, u16 z)
{
    return __builtin_bswap64(x) + __builtin_bswap32(y) + __builtin_bswap16(z);
}

__attribute__((noinline)) int branches(s64 a, u64 b, s32 c, u32 d)
{
    int r = 0;
    if (a > 5) r += 1;
    if (a < -5) r += 2;
    if (b > 10) r += 4;
    if (b <= 20) r += 8;
    if (c >= 3) r += 16;
    if (c < -100000) r += 17;
    if (d != 7) r += 32;
    if (d > 0xfffffff0u) r += 33;
    if (b & 0x40) r += 64;
    if (a == (s64)b) r += 128;
    if ((u32)b < d) r += 256;
    if ((s32)b <= c) r += 512;
    return r;
}

SEC("socket")
int prog(void *ctx)
{
    u64 a = *(u32 *)ctx, b = *((u32 *)ctx + 4);
    return alu64(a, b, -(s64)a) + alu32(a, b, -(s32)b) + endian(a, b, b) + branches(a, b, a, b);
}

char LICENSE[] SEC("license") = "GPL";
