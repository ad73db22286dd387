"""The schedules of tkc.attention's kernels, and the spaces they are tuned over.

A schedule is one validated, frozen value per kernel: ForwardSchedule for
attention_hopper (the forward), BackwardSchedule for attention_bwd (the
backward). It holds what varies between the kernels tkc.attention launches;
the builders take (D, causal, layout, schedule) and their bodies read the
fields. A combination of fields that no kernel can have is refused here
(ValueError); one that the head dim or layout rules out is refused by the
builder (TkcError).

The spaces: per head dim, mask and layout, the schedules a tuned table may
pick (forward_space, backward_space; the first is the default, which a key
missing from every table runs). They hold the schedules measured worth
having on the H100, nothing more; which one runs for how many keys is data,
per GPU, in tkc/tune/tables (attention_tuned.py reads them). Why each one is
in its space: docs/attention.md, "Which kernel runs when".
"""
from __future__ import annotations

import dataclasses

__all__ = ["BUCKETS", "BackwardSchedule", "ForwardSchedule", "backward_space", "decode_schedule",
           "forward_space", "fp8_forward_space", "key_bucket"]

# The key counts a table distinguishes: powers of two, a bucket holding
# from its count to the next (below 128: 128's, from 65536: 65536's). The
# H100's thresholds (1024, 2048, 8192 keys) are bucket edges. 128 and 256
# came later (2026-12-02): there a query tile's fill decides (D 64's three
# consumers, 192-row tiles, compute 384 rows for 256); a key that no table
# holds there runs 512's pick (attention_tuned's fallback).
BUCKETS = tuple(1 << i for i in range(7, 17))


def key_bucket(keys: int) -> int:
    """The bucket of a key count (Lk, or varlen's max_seqlen_k)."""
    return min(max(1 << max(int(keys), 1).bit_length() - 1, BUCKETS[0]), BUCKETS[-1])


@dataclasses.dataclass(frozen=True)
class ForwardSchedule:
    """attention_hopper's schedule (its docstring says what each field does).

    KV: keys a tile (64 or 128; 80 for D 256: its two-stage ring then fills shared memory, 224
    KB; 192 for the FP8 forward). stages: the K/V ring's depth ("auto": the
    deepest that fits). consumers: consumer warpgroups of 64 query rows (1 to
    3). overlap, pingpong: FlashAttention-3's intra-warpgroup overlap and
    ping-pong. persistent: False (a block a work item), True (a block an SM
    over the items) or "zigzag" (the items dealt forwards and backwards).
    blocks_per_sm: blocks sharing an SM (1 or 2). ex2_fma: the share of the
    exponentials computed on the FMA pipe. diagonal_mask: (causal) the
    diagonal's mask alone. o_via_q: O stored by TMA through Q's tile."""
    KV: int = 128
    stages: int | str = "auto"
    consumers: int = 2
    overlap: bool = False
    pingpong: bool = False
    persistent: bool | str = False
    blocks_per_sm: int = 1
    ex2_fma: float = 0.0
    diagonal_mask: bool = False
    o_via_q: bool = False

    def __post_init__(self):
        _flags(self, "overlap", "pingpong", "diagonal_mask", "o_via_q")
        if self.KV not in (64, 80, 128, 192):
            raise ValueError(f"ForwardSchedule: KV must be 64, 80 (D 256), 128 or 192 (FP8) keys a tile, "
                             f"got {self.KV!r}")
        if self.stages != "auto" and not (type(self.stages) is int and self.stages >= 1):
            raise ValueError(f"ForwardSchedule: stages must be 'auto' or a count >= 1, got {self.stages!r}")
        if self.consumers not in (1, 2, 3) or type(self.consumers) is not int:
            raise ValueError(f"ForwardSchedule: consumers must be 1, 2 or 3 warpgroups, got "
                             f"{self.consumers!r}")
        if self.persistent not in (False, True, "zigzag") or type(self.persistent) not in (bool, str):
            raise ValueError(f"ForwardSchedule: persistent must be False, True or 'zigzag', got "
                             f"{self.persistent!r}")
        if self.blocks_per_sm not in (1, 2) or type(self.blocks_per_sm) is not int:
            raise ValueError(f"ForwardSchedule: blocks_per_sm must be 1 or 2, got {self.blocks_per_sm!r}")
        if not 0.0 <= self.ex2_fma <= 1.0:
            raise ValueError(f"ForwardSchedule: ex2_fma is a share of the exponentials (0 to 1), got "
                             f"{self.ex2_fma!r}")
        if self.o_via_q and self.persistent:
            raise ValueError("ForwardSchedule: o_via_q needs a kernel that is not persistent (Q's other "
                             "slot holds the next item's Q)")

    def name(self, D: int, causal: bool, layout: str) -> str:
        """The kernel's name: the head dim, mask and layout, and every field
        off its default spelt out (the names are the cache's and ncu's)."""
        return "_".join(x for x in (
            f"attn_fwd_d{D}", "causal" if causal else "", layout, f"kv{self.KV}",
            "" if self.stages == "auto" else f"s{self.stages}", "overlap" if self.overlap else "",
            "pingpong" if self.pingpong else "", "" if self.consumers == 2 else f"c{self.consumers}",
            "zigzag" if self.persistent == "zigzag" else "persistent" if self.persistent else "",
            "" if self.blocks_per_sm == 1 else f"b{self.blocks_per_sm}",
            f"fma{round(self.ex2_fma * 100)}" if self.ex2_fma else "",
            "diag" if self.diagonal_mask and causal else "", "oq" if self.o_via_q else "") if x)


@dataclasses.dataclass(frozen=True)
class BackwardSchedule:
    """attention_bwd's schedule (its docstring says what each field does).

    BQ: query rows a step (64; 128 at D = 64). overlap: the S^T and dP^T
    waits leave the next wgmma in flight. ds_slots: dS^T's shared tiles (1
    or 2). stats_acc: the wgmmas' accumulators start at the statistics.
    dkv_tma: dK and dV stored by TMA through K's and V's tiles (else from
    registers). dq_packed (D = 256): dQ's atomic adds four columns a lane.
    The first four schedule the D <= 128 body, dq_packed the D = 256 one."""
    BQ: int = 64
    overlap: bool = False
    ds_slots: int = 1
    stats_acc: bool = False
    dkv_tma: bool = False
    dq_packed: bool = False

    def __post_init__(self):
        _flags(self, "overlap", "stats_acc", "dkv_tma", "dq_packed")
        if self.BQ not in (64, 128) or type(self.BQ) is not int:
            raise ValueError(f"BackwardSchedule: BQ must be 64 or 128 query rows, got {self.BQ!r}")
        if self.ds_slots not in (1, 2) or type(self.ds_slots) is not int:
            raise ValueError(f"BackwardSchedule: ds_slots must be 1 or 2, got {self.ds_slots!r}")
        if self.dq_packed and (self.BQ != 64 or self.overlap or self.ds_slots != 1 or self.stats_acc):
            raise ValueError("BackwardSchedule: dq_packed orders the D = 256 body's atomic adds of dQ; "
                             "BQ = 128, overlap, ds_slots and stats_acc schedule the D <= 128 body")

    def name(self, D: int, causal: bool, layout: str) -> str:
        """The kernel's name, as ForwardSchedule.name (dQ by atomic adds at D =
        256; dkv_tma named only where it is not the layout's way: TMA
        stores outside varlen)."""
        return "_".join(x for x in (
            f"attn_bwd_d{D}", "causal" if causal else "", layout, "dqatomic" if D == 256 else "",
            "" if self.BQ == 64 else f"q{self.BQ}", "overlap" if self.overlap else "",
            "" if self.ds_slots == 1 else f"ds{self.ds_slots}",
            "" if self.dkv_tma == (layout != "varlen") else "dkvtma" if self.dkv_tma else "dkvreg",
            "sacc" if self.stats_acc else "", "dqpk" if self.dq_packed else "") if x)


def _flags(schedule, *names: str) -> None:
    for n in names:
        if type(getattr(schedule, n)) is not bool:
            raise ValueError(f"{type(schedule).__name__}: {n} must be True or False, got "
                             f"{getattr(schedule, n)!r}")


def forward_space(D: int, causal: bool, layout: str) -> tuple[ForwardSchedule, ...]:
    """The forwards a table may pick for (D, causal, layout), the default
    (short sequences') first. Each space has the plain pipelined loop
    ("short") and FlashAttention-3's schedule ("long": overlap + ping-pong,
    whose extra iteration short sequences do not amortise). Per head dim:
    two stages and three consumers at D 64; at D 256 64-key tiles and O
    through Q's tile (not varlen: a TMA store cannot clip to a sequence),
    the long one with 80-key tiles, whose two-stage ring fills shared
    memory (H200, 2026-11-29: 0.93-0.98 of SDPA with 64-key tiles, 0.96-1.02
    with 80, L 1k-4k; tkc tune picked 80 from 1k keys on, fixed lengths and
    varlen, with and without the mask; the H100's table follows, not
    measured there).
    Without the mask, fixed lengths: persistent (the long one at D 96 and 128
    only; at D 256 two Q slots do not fit). With it, fixed lengths: the
    zigzag order (D 64: two consumers, the diagonal's mask alone, 3/8 of
    the exponentials on the FMA pipe; D 128 also its long one, with the
    diagonal's mask alone); varlen: the paired forward (one consumer
    warpgroup, two blocks an SM). D 96 and 128 without the mask, fixed
    lengths: the short one a plain persistent loop with an eighth of the
    exponentials on the FMA pipe (both warpgroups' softmax at once then
    queue less on the MUFU). H200, 2026-12-01, B 16 H 16 D 128 against
    cuDNN, CUDA graphs: at 512 and 1024 keys 0.97-0.99 where FlashAttention-3's
    ping-pong without the overlap, the pick since 2026-11-29 (0.98-1.00 then
    against the plain loop's 0.87-0.94; 0.96 here), read 0.96-0.98; tkc tune
    picked it at D 96 (512 and 1024 keys, 2-6%) and D 128 (1024); as fast at
    2048, 3-6% slower beyond. The ping-pong alone went with it (the H100's
    table follows, not measured there); both at once (H200, 2026-12-02, tkc
    tune at every D 96 and 128 key) won no key, within 1% of the share alone
    to 1024 keys and 4-15% slower than the long one beyond. D 96 has D 128's
    spaces (tuned on the H200 only), but for more of its exponentials on the FMA pipe: its
    wgmmas take 3/4 of D 128's time a key, its softmax as long. tkc tune
    over the spaces with shares of 1/8 and 1/4 added to each schedule
    (H200, 2026-12-01): with the mask (fixed lengths) the zigzag loop with
    1/4 (1024 keys: 8% faster, 512 even) and the zigzag overlap with 1/8
    (2048-8192: 5-7%); varlen without it both with 1/8 (2-4%). D 128 gained
    1% or nothing there. D 64 without the mask (fixed lengths) also has two
    consumers (128-row tiles, which 128 and 256 queries fill; three
    consumers' 192-row tiles compute 384 rows for 256): with 3/8 of the
    exponentials on the FMA pipe (short sequences: 128 and 256 keys 38.1 and
    55.8 µs against 38.8 and 58.5 without, SDPA 38.3 and 55.2) and with
    FlashAttention-3's overlap and ping-pong (a prefill's chunk of 128-512
    queries over 4096-16384 keys: 3-6% faster than either, 0.96-1.02 of
    SDPA; H200, 2026-12-02, CUDA graphs)."""
    fixed = layout != "varlen"
    short = {64: ForwardSchedule(stages=2, consumers=3), 96: ForwardSchedule(), 128: ForwardSchedule(),
             256: ForwardSchedule(KV=64, stages=2, o_via_q=fixed)}[D]
    long = dataclasses.replace(short, overlap=True, pingpong=True, KV=80 if D == 256 else short.KV)

    def d96(s, share):   # D 96: this share of the exponentials on the FMA pipe (the docstring)
        return dataclasses.replace(s, ex2_fma=share) if D == 96 else s
    if D == 256 or not fixed and not causal:
        if D == 64:   # varlen: two consumers too (128-row query tiles, as bhld's below 512 keys)
            return short, long, dataclasses.replace(short, consumers=2)
        return d96(short, 0.125), d96(long, 0.125)
    if not causal:   # D 96 and 128: a share of the exponentials on the FMA pipe where keys are few
        if D == 64:   # two consumers too: 128-row tiles, which 128 and 256 rows fill (the docstring's end)
            two = dataclasses.replace(short, persistent=True, consumers=2)
            return (dataclasses.replace(short, persistent=True), long,
                    dataclasses.replace(two, ex2_fma=0.375), dataclasses.replace(two, overlap=True, pingpong=True))
        return (dataclasses.replace(short, persistent=True, ex2_fma=0.125),
                dataclasses.replace(long, persistent=True))
    if not fixed:
        return ForwardSchedule(KV=128 if D == 64 else 64, stages=2, consumers=1, blocks_per_sm=2), long
    if D == 64:
        return ForwardSchedule(stages=2, diagonal_mask=True, persistent="zigzag", ex2_fma=0.375), long
    return (d96(dataclasses.replace(short, persistent="zigzag"), 0.25),
            d96(dataclasses.replace(long, persistent="zigzag", diagonal_mask=True), 0.125), long)


def fp8_forward_space(D: int, causal: bool) -> tuple[ForwardSchedule, ...]:
    """The FP8 forwards (tkc.attention_fp8: bhld, D 64, 128, 256) a table may
    pick, the default (the longest sequences' pick) first: what the H200's
    tuning picked (tkc/tune/tables/nvidia-h200.json, 2026-11-29 and, D 128,
    11-30) out of the bf16 forward's candidates and FlashAttention-3's FP8
    tile of 192 keys (its pick for a V stored transposed; V^T's 192-byte
    rows take the 64-byte swizzle). Measured there and dropped, picked by no
    key: at D 128 the 128-key ping-pong schedules, the 192-key persistent
    overlap / ping-pong loop without the mask (FlashAttention-3's; 1-9%
    slower than three consumers), two or three consumers with no exponential
    on the FMA pipe or a sixteenth, a quarter or 3/16 of them there, 192 keys
    in a zigzag, one consumer with two blocks an SM; with the mask three
    consumers (128- or 64-key tiles: 5-30% slower); at D 64 without the mask
    the overlap / ping-pong loop, and no FMA share there helped (MUFU-bound
    twice over, yet 1/8-1/2 ran 0-10% slower). D 64 without the mask: two
    consumers below 512 keys (128-row query tiles, as bf16's: 9-10% faster at
    128 and 256 keys, H200, 2026-12-02)."""
    S = ForwardSchedule
    if D == 256:   # bf16's (64-key tiles, two stages) with O through its own tile
        return S(KV=64, stages=2, overlap=True, pingpong=True), S(KV=64, stages=2)
    if D == 64:
        if causal:   # from 8k keys / below
            return (S(stages=2, consumers=3, overlap=True, pingpong=True),
                    S(stages=2, diagonal_mask=True, persistent="zigzag", ex2_fma=0.375))
        return S(stages=2, consumers=3, persistent=True), S(stages=2, persistent=True)   # (two: as bf16's)
    # causal: from 16k keys / below 2k / between; without the mask three consumer warpgroups
    # with an eighth of the exponentials on the FMA pipe at every length (the MUFU's 16 a
    # clock per SM take as long as the FP8 wgmmas at D 128: more warps and a share moved off
    # it beat the overlap and ping-pong, 5-16% from 2k keys: tkc tune on the H200, 2026-11-30)
    if causal:
        return (S(KV=192, overlap=True, pingpong=True), S(persistent="zigzag"),
                S(persistent="zigzag", overlap=True, diagonal_mask=True))
    return S(consumers=3, persistent=True, ex2_fma=0.125),


def backward_space(D: int, causal: bool, layout: str) -> tuple[BackwardSchedule, ...]:
    """The backwards a table may pick for (D, causal, layout), the default
    first: at D <= 128 the overlap, the statistics in the accumulators and
    (fixed lengths) two dS^T tiles, BQ 128 at D 64; at D 256 dQ's adds
    packed. dK and dV by TMA stores outside varlen, and at D 64 without the
    mask also from registers (the TMA stores' epilogue makes ptxas spill in
    the loop there)."""
    fixed = layout != "varlen"
    if D == 256:
        return BackwardSchedule(dq_packed=True, dkv_tma=fixed),
    s = BackwardSchedule(BQ=128 if D == 64 else 64, overlap=True, ds_slots=2 if fixed else 1,
                         stats_acc=True, dkv_tma=fixed)
    if D == 64 and not causal and fixed:
        return s, dataclasses.replace(s, dkv_tma=False)
    return s,


def decode_schedule(D: int) -> ForwardSchedule:
    """tkc.attention's decode path (torchops/attn_decode.py): one consumer
    warpgroup (64 packed query rows), KV 128 (D 256: 64, for two stages); the
    split-KV kernel takes it as it is, the unsplit one persistent. Measured
    on the H200 (2026-11-30, 13 decode shapes): KV 64 with 2 or 4 stages,
    and persistent split kernels, were as fast or up to 5% slower."""
    return ForwardSchedule(KV=64 if D == 256 else 128, consumers=1)
