"""Programs that use every instruction form the kernel accepts (for tests)."""
from pyebpf.program import R0, R1, R2, R3, R6, R10, W1, W2, Program

ALU_OPS = ("add", "sub", "mul", "div", "sdiv", "or_", "and_", "lsh", "rsh", "mod", "smod",
           "xor", "mov", "arsh")
CONDS = ("jeq", "jne", "jgt", "jge", "jlt", "jle", "jsgt", "jsge", "jslt", "jsle", "jset")


def xdp_everything(map_name: str = "scratch") -> Program:
    """An XDP program (valid for the verifier) with every non-packet form."""
    p = Program("everything")
    p.mov(R6, R1)
    for dst, src in ((R1, R2), (W1, W2)):
        for name in ALU_OPS:
            p.mov(R1, 100).mov(R2, 3)
            getattr(p, name)(dst, src)
            getattr(p, name)(dst, 3)
    p.neg(R1).neg(W1)
    for bits in (8, 16, 32):
        p.movsx(R1, R2, bits)
    for bits in (8, 16):
        p.movsx(W1, W2, bits)
    for bits in (16, 32, 64):
        p.le(R1, bits).be(R1, bits).bswap(R1, bits)
    p.lddw(R1, 0x123456789ABCDEF0)
    p.lddw(R1, -2)
    # memory: stores of every size, immediate and register; loads; sign-extending loads
    for size, off in ((1, -1), (2, -4), (4, -8), (8, -16)):
        p.store(R10, off, 5, size)
        p.store(R10, off, R1, size)
        p.load(R2, R10, off, size)
        if size != 8:
            p.load(R2, R10, off, size, signed=True)
    # atomics on initialised stack
    p.stdw(R10, -24, 0).stw(R10, -32, 0)
    p.mov(R2, 1)
    for size, off in ((8, -24), (4, -32)):
        for name in ("atomic_add", "atomic_or", "atomic_and", "atomic_xor"):
            getattr(p, name)(R10, off, R2, size=size)
            getattr(p, name)(R10, off, R2, size=size, fetch=True)
        p.xchg(R10, off, R2, size=size)
        p.mov(R0, 0)
        p.cmpxchg(R10, off, R2, size=size)
    for size, off in ((1, -1), (2, -4), (4, -8), (8, -16)):
        p.load_acquire(R3, R10, off, size)
        p.store_release(R10, off, R3, size)
    # every conditional jump, 64 and 32 bits, immediate and register (to the next insn)
    p.mov(R1, 7).mov(R2, 9)
    for name in CONDS:
        for dst, src in ((R1, R2), (W1, W2)):
            getattr(p, name)(dst, src, 0)
            getattr(p, name)(dst, 3, 0)
    p.ja(0).gotol(0)
    p.label("loop")
    p.may_goto("out")
    p.ja("loop")
    p.label("out")
    # helpers, map references, a local call (an ld_imm64 of a function, for
    # callbacks, needs BTF func_info, which pyebpf does not generate)
    p.call("ktime_get_ns")
    p.stdw(R10, -40, 0)
    p.ld_map(R1, map_name).mov(R2, R10).add(R2, -40).call("map_lookup_elem")
    p.ld_map_value(R1, map_name, 0)
    p.mov(R1, 5).call_local("double")
    p.mov(R0, 2).exit()
    f = p.subprogram("double")
    f.mov(R0, R1).add(R0, R1).exit()
    return p


def socket_filter_everything() -> Program:
    """A socket filter with the legacy packet loads (LD_ABS, LD_IND)."""
    p = Program("ldabs")
    p.mov(R6, R1)
    for size in (1, 2, 4):
        p.ldabs(size, 0)
        p.mov(R2, 0)
        p.ldind(size, R2, 0)
    p.mov(R0, 0).exit()
    return p
