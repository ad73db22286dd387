// The tk dialect: ThunderKittens' tile vocabulary as MLIR types and ops.
// This file is the single source of truth; tkc/dialect/__init__.py loads it
// into any Context. Everything IRDL cannot say (shapes agree, layouts are
// legal for mma, ...) is checked by the tk-verify pass (tkc/passes/verify.py).
// Semantics of every op: docs/tile-ir.md.
irdl.dialect @tk {
  // Register tile: a rows x cols matrix held by one worker (a warp) in the
  // tensor-core fragment layout of 16x16 base tiles. layout "row" is the
  // A/C-operand layout, "col" the B-operand layout of mma_AB; "wide" gives
  // each lane 8 adjacent elements of a row (16-byte memory accesses).
  // An i32 tile holds integers (indices, counts): the elementwise integer
  // ops, reductions and moves, no mma and no float math (tk-verify).
  irdl.type @rt {
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %f32 = irdl.is f32
    %i32 = irdl.is i32
    %f8e4m3 = irdl.is f8E4M3FN
    %f8e5m2 = irdl.is f8E5M2
    %dtype = irdl.any_of(%bf16, %f16, %f32, %i32, %f8e4m3, %f8e5m2)
    %rows = irdl.base "#builtin.integer"
    %cols = irdl.base "#builtin.integer"
    %row = irdl.is "row"
    %col = irdl.is "col"
    %wide = irdl.is "wide"
    %layout = irdl.any_of(%row, %col, %wide)
    irdl.parameters(dtype: %dtype, rows: %rows, cols: %cols, layout: %layout)
  }
  // Register vector: a tile's vector. kind "col" (ThunderKittens' col_vec)
  // has one element per tile row (row_max's result, sub_row's operand);
  // kind "row" has one element per tile column (col_max, sub_col); kind
  // "flat" is a vector on its own, L/32 elements per lane, no replication.
  // Element types as an rt's.
  irdl.type @rv {
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %f32 = irdl.is f32
    %i32 = irdl.is i32
    %dtype = irdl.any_of(%bf16, %f16, %f32, %i32)
    %length = irdl.base "#builtin.integer"
    %row = irdl.is "row"
    %col = irdl.is "col"
    %flat = irdl.is "flat"
    %kind = irdl.any_of(%row, %col, %flat)
    irdl.parameters(dtype: %dtype, length: %length, kind: %kind)
  }
  // Shared tile: rows x cols in shared memory, stored in 16x16-based
  // layout with a swizzle; "auto" is decided by tk-layout-selection.
  irdl.type @st {
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %f32 = irdl.is f32
    %f8e4m3 = irdl.is f8E4M3FN
    %f8e5m2 = irdl.is f8E5M2
    %dtype = irdl.any_of(%bf16, %f16, %f32, %f8e4m3, %f8e5m2)
    %rows = irdl.base "#builtin.integer"
    %cols = irdl.base "#builtin.integer"
    %auto = irdl.is "auto"
    %none = irdl.is "none"
    %s32 = irdl.is "32b"
    %s64 = irdl.is "64b"
    %s128 = irdl.is "128b"
    %swizzle = irdl.any_of(%auto, %none, %s32, %s64, %s128)
    irdl.parameters(dtype: %dtype, rows: %rows, cols: %cols, swizzle: %swizzle)
  }
  // Shared vector.
  irdl.type @sv {
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %f32 = irdl.is f32
    %dtype = irdl.any_of(%bf16, %f16, %f32)
    %length = irdl.base "#builtin.integer"
    irdl.parameters(dtype: %dtype, length: %length)
  }
  // Global layout: a contiguous 4-D tensor (batch, depth, rows, cols) in
  // device memory; each dim is static (>0) or runtime (-1). An i32 gl holds
  // integers (indices, counts: moved one element at a time or with i32
  // tiles); an i64 gl int64 indices, read one element at a time.
  irdl.type @gl {
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %f32 = irdl.is f32
    %i32 = irdl.is i32
    %i64 = irdl.is i64
    %f8e4m3 = irdl.is f8E4M3FN
    %f8e5m2 = irdl.is f8E5M2
    %dtype = irdl.any_of(%bf16, %f16, %f32, %i32, %i64, %f8e4m3, %f8e5m2)
    %b = irdl.base "#builtin.integer"
    %d = irdl.base "#builtin.integer"
    %r = irdl.base "#builtin.integer"
    %c = irdl.base "#builtin.integer"
    irdl.parameters(dtype: %dtype, b: %b, d: %d, r: %r, c: %c)
  }
  // An mbarrier in shared memory (Hopper producer/consumer sync).
  irdl.type @barrier {
  }

  // ---- initialisers: () -> rt | rv
  irdl.operation @zero {
    %t = irdl.any
    irdl.results(out: %t)
  }
  irdl.operation @ones {
    %t = irdl.any
    irdl.results(out: %t)
  }
  irdl.operation @neg_infty {
    %t = irdl.any
    irdl.results(out: %t)
  }
  irdl.operation @pos_infty {
    %t = irdl.any
    irdl.results(out: %t)
  }
  // value: an f32 (float result) or an i32 (i32 result); tk-verify checks which
  irdl.operation @fill {
    %vf = irdl.is f32
    %vi = irdl.is i32
    %v = irdl.any_of(%vf, %vi)
    %t = irdl.any
    irdl.operands(value: %v)
    irdl.results(out: %t)
  }

  // ---- unary maps: rt -> rt, rv -> rv (copy may change dtype); the math
  // functions' approximations are in docs/tile-ir.md ("Math")
  irdl.operation @copy {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @exp {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @exp2 {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @log {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @log2 {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @abs {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @relu {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @neg {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }

  irdl.operation @sqrt {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @rsqrt {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @rcp {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @sigmoid {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @silu {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @tanh {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @erf {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @gelu {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @gelu_tanh {
    %x = irdl.any
    %t = irdl.any
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  // x * y + z in one rounding; y and z tiles of x's type or f32 scalars.
  irdl.operation @fma {
    %x = irdl.any
    %y = irdl.any
    %z = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y, z: %z)
    irdl.results(out: %t)
  }

  // ---- binary maps: (rt, rt | f32) -> rt, (rv, rv | f32) -> rv
  irdl.operation @add {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }
  irdl.operation @sub {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }
  irdl.operation @mul {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }
  irdl.operation @div {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }
  irdl.operation @max {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }
  irdl.operation @min {
    %x = irdl.any
    %y = irdl.any
    %t = irdl.any
    irdl.operands(x: %x, y: %y)
    irdl.results(out: %t)
  }

  // ---- reductions: rt (+ optional rv to accumulate onto) -> rv
  irdl.operation @row_max {
    %x = irdl.base @tk::@rt
    %i = irdl.base @tk::@rv
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, init: optional %i)
    irdl.results(out: %t)
  }
  irdl.operation @row_sum {
    %x = irdl.base @tk::@rt
    %i = irdl.base @tk::@rv
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, init: optional %i)
    irdl.results(out: %t)
  }
  irdl.operation @col_max {
    %x = irdl.base @tk::@rt
    %i = irdl.base @tk::@rv
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, init: optional %i)
    irdl.results(out: %t)
  }
  irdl.operation @col_sum {
    %x = irdl.base @tk::@rt
    %i = irdl.base @tk::@rv
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, init: optional %i)
    irdl.results(out: %t)
  }

  // ---- picks: one row or column of an rt as an rv (the rv a reduction
  // along the other axis would give): row_pick(x, j) = x[:, j] (each row's
  // element j, a "col" rv), col_pick(x, i) = x[i, :] (a "row" rv)
  irdl.operation @row_pick {
    %x = irdl.base @tk::@rt
    %i = irdl.is index
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, index: %i)
    irdl.results(out: %t)
  }
  irdl.operation @col_pick {
    %x = irdl.base @tk::@rt
    %i = irdl.is index
    %t = irdl.base @tk::@rv
    irdl.operands(x: %x, index: %i)
    irdl.results(out: %t)
  }

  // ---- roll: numpy.roll(x, shift, axis) of a row-layout rt, a constant
  // shift (out[i] = x[(i - shift) mod n] along the axis: rows 0, columns 1)
  irdl.operation @roll {
    %n = irdl.base "#builtin.integer"
    %a = irdl.base "#builtin.integer"
    %x = irdl.base @tk::@rt
    %t = irdl.base @tk::@rt
    irdl.attributes { "shift" = %n, "axis" = %a }
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }

  // ---- masks: iota gives each element its index along `axis` (0: row,
  // 1: column of an rt; 0 for an rv), plus start (an f32, or an i32 for an
  // i32 result); where picks x where `a cmp b`, else y (a, b, x, y: tiles of
  // the result's shape, or f32 scalars; i32 scalars beside i32 tiles).
  irdl.operation @iota {
    %n = irdl.base "#builtin.integer"
    %sf = irdl.is f32
    %si = irdl.is i32
    %f = irdl.any_of(%sf, %si)
    %t = irdl.any
    irdl.attributes { "axis" = %n }
    irdl.operands(start: optional %f)
    irdl.results(out: %t)
  }
  irdl.operation @where {
    %a = irdl.any
    %b = irdl.any
    %x = irdl.any
    %y = irdl.any
    %lt = irdl.is "lt"
    %le = irdl.is "le"
    %gt = irdl.is "gt"
    %ge = irdl.is "ge"
    %eq = irdl.is "eq"
    %ne = irdl.is "ne"
    %cmp = irdl.any_of(%lt, %le, %gt, %ge, %eq, %ne)
    %t = irdl.any
    irdl.attributes { "cmp" = %cmp }
    irdl.operands(a: %a, b: %b, x: %x, y: %y)
    irdl.results(out: %t)
  }

  // ---- random numbers: uniform in [0, 1) from Philox4x32-10 (tkc/philox.py);
  // element (i, j) is number base + i * stride + j of the tensor's numbering.
  irdl.operation @rand {
    %i = irdl.is index
    %t = irdl.any
    irdl.operands(seed: %i, offset: %i, base: %i, stride: %i)
    irdl.results(out: %t)
  }

  // ---- whole-vector reductions: rv -> f32, or i32 of an i32 rv (every lane
  // holds the result)
  irdl.operation @vec_sum {
    %x = irdl.base @tk::@rv
    %tf = irdl.is f32
    %ti = irdl.is i32
    %t = irdl.any_of(%tf, %ti)
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @vec_max {
    %x = irdl.base @tk::@rv
    %tf = irdl.is f32
    %ti = irdl.is i32
    %t = irdl.any_of(%tf, %ti)
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @vec_min {
    %x = irdl.base @tk::@rv
    %tf = irdl.is f32
    %ti = irdl.is i32
    %t = irdl.any_of(%tf, %ti)
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }

  // ---- block reductions: the elementwise sum / max / min over the warps of
  // the block (or, with tk.sync's id / warps, of the barrier group: warps
  // 0 .. warps-1) of each warp's f32 x (rt, rv or f32 scalar); every warp
  // gets the same result. Sums add in warp order, ((x0 + x1) + x2) + ...
  // Each warp's values pass through `scratch`, an sv<f32> of at least
  // warps * 32 * (x's scalars a lane) (one per lane and warp); the op
  // synchronises the group as tk.sync does (tk-verify checks the rest).
  irdl.operation @block_sum {
    %x = irdl.any
    %s = irdl.base @tk::@sv
    %t = irdl.any
    irdl.operands(x: %x, scratch: %s)
    irdl.results(out: %t)
  }
  irdl.operation @block_max {
    %x = irdl.any
    %s = irdl.base @tk::@sv
    %t = irdl.any
    irdl.operands(x: %x, scratch: %s)
    irdl.results(out: %t)
  }
  irdl.operation @block_min {
    %x = irdl.any
    %s = irdl.base @tk::@sv
    %t = irdl.any
    irdl.operands(x: %x, scratch: %s)
    irdl.results(out: %t)
  }

  // ---- broadcasts: (rt, rv) -> rt. *_row: one vector element per row
  // (a "col" vector); *_col: one element per column (a "row" vector).
  irdl.operation @add_row {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @sub_row {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @mul_row {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @div_row {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @add_col {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @sub_col {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @mul_col {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }
  irdl.operation @div_col {
    %x = irdl.base @tk::@rt
    %v = irdl.base @tk::@rv
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x, v: %v)
    irdl.results(out: %t)
  }

  // ---- warp-level matrix multiply-accumulate: d = a @ b + c with the
  // transposes in the name. Layouts: AB (row, col), ABt (row, row),
  // AtB (col, col), AtBt (col, row); c and d are f32 row tiles.
  irdl.operation @mma_ab {
    %a = irdl.base @tk::@rt
    %b = irdl.base @tk::@rt
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    irdl.operands(a: %a, b: %b, c: %c)
    irdl.results(d: %d)
  }
  irdl.operation @mma_abt {
    %a = irdl.base @tk::@rt
    %b = irdl.base @tk::@rt
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    irdl.operands(a: %a, b: %b, c: %c)
    irdl.results(d: %d)
  }
  irdl.operation @mma_atb {
    %a = irdl.base @tk::@rt
    %b = irdl.base @tk::@rt
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    irdl.operands(a: %a, b: %b, c: %c)
    irdl.results(d: %d)
  }
  irdl.operation @mma_atbt {
    %a = irdl.base @tk::@rt
    %b = irdl.base @tk::@rt
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    irdl.operands(a: %a, b: %b, c: %c)
    irdl.results(d: %d)
  }

  // ---- register layout changes
  irdl.operation @swap_layout {
    %x = irdl.base @tk::@rt
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }
  irdl.operation @transpose {
    %x = irdl.base @tk::@rt
    %t = irdl.base @tk::@rt
    irdl.operands(x: %x)
    irdl.results(out: %t)
  }

  // ---- memory
  // A shared-memory buffer (st or sv), alive for the whole kernel.
  irdl.operation @alloc {
    // (irdl.any_of over irdl.base crashes IRDL loading in MLIR 22;
    // tk-verify checks that the result is an st or sv.)
    %t = irdl.any
    irdl.results(out: %t)
  }
  // Read into registers by one warp: gl (4 tile coords b, d, r, c) | st
  // (2 coords in units of the result tile) | sv (no coords) -> rt | rv.
  irdl.operation @load {
    %src = irdl.any
    %i = irdl.is index
    %t = irdl.any
    irdl.operands(src: %src, idx: variadic %i)
    irdl.results(out: %t)
  }
  // Columns 2j and 2j+1 of a gl or st tile twice the result's width, into two
  // rt (interleaved pairs: complex numbers, interleaved rotary); attributes as load's.
  irdl.operation @load_split {
    %src = irdl.any
    %i = irdl.is index
    %t = irdl.base @tk::@rt
    irdl.operands(src: %src, idx: variadic %i)
    irdl.results(even: %t, odd: %t)
  }
  // The mirror of load_split: two rt interleaved into a gl or st tile.
  irdl.operation @store_join {
    %dst = irdl.any
    %x = irdl.base @tk::@rt
    %i = irdl.is index
    irdl.operands(dst: %dst, even: %x, odd: %x, idx: variadic %i)
  }
  // Write registers out by one warp: the mirror of load.
  irdl.operation @store {
    %dst = irdl.any
    %x = irdl.any
    %i = irdl.is index
    irdl.operands(dst: %dst, x: %x, idx: variadic %i)
  }
  // Cooperative copy global -> shared by a group of `warps` consecutive
  // warps (coalesced 16-byte accesses); all warps of the group call it.
  irdl.operation @group_load {
    %dst = irdl.any
    %src = irdl.base @tk::@gl
    %i = irdl.is index
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "warps" = %n }
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }
  // Cooperative copy shared -> global by a group of `warps` warps.
  irdl.operation @group_store {
    %dst = irdl.base @tk::@gl
    %src = irdl.any
    %i = irdl.is index
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "warps" = %n }
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }

  // ---- block level: rings, subtiles, compiler-synchronised TMA
  // Slot %i of a ring (a tk.alloc {stages = N} result): same type as the ring.
  irdl.operation @stage {
    %r = irdl.any
    %i = irdl.is index
    %t = irdl.any
    irdl.operands(ring: %r, idx: %i)
    irdl.results(out: %t)
  }
  // A view of part of an st (run-time indices) or rt (constant indices), in
  // units of the result's shape.
  irdl.operation @subtile {
    %x = irdl.any
    %i = irdl.is index
    %t = irdl.any
    irdl.operands(x: %x, row: %i, col: %i)
    irdl.results(out: %t)
  }
  // Block-level TMA load gl -> st (or sv: a 1-row box; tk-verify checks the
  // kind), synchronised by the compiler
  // (tk-pipeline-staging turns it into the producer's TMA and mbarriers).
  irdl.operation @pipeline_load {
    %dst = irdl.any
    %src = irdl.base @tk::@gl
    %i = irdl.is index
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }
  // Block-level TMA store st -> gl, synchronised by the compiler; with the
  // unit attribute `add` a reduce-add (gl += st), as tma_store_add.
  irdl.operation @pipeline_store {
    %dst = irdl.base @tk::@gl
    %src = irdl.base @tk::@st
    %i = irdl.is index
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }

  // ---- workers and the grid
  irdl.operation @laneid {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  irdl.operation @warpid {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  irdl.operation @warpgroupid {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  irdl.operation @block_idx {
    %t = irdl.is index
    %x = irdl.is "x"
    %y = irdl.is "y"
    %z = irdl.is "z"
    %dim = irdl.any_of(%x, %y, %z)
    irdl.attributes { "dim" = %dim }
    irdl.results(out: %t)
  }
  irdl.operation @grid_dim {
    %t = irdl.is index
    %x = irdl.is "x"
    %y = irdl.is "y"
    %z = irdl.is "z"
    %dim = irdl.any_of(%x, %y, %z)
    irdl.attributes { "dim" = %dim }
    irdl.results(out: %t)
  }
  // A view of part of a global layout: along `axis` (r or c) it starts at
  // element `start` of src and has `size` elements (a runtime dim); the
  // other dims are src's. Bounds-checked accesses (fill, clip) stop at its
  // edges; TMA loads read src's elements past them. Its type is src's with
  // a runtime dim along `axis` (tk-verify: one constraint variable here
  // would make it src's type, refusing a slice of a static dim).
  irdl.operation @gl_slice {
    %g = irdl.base @tk::@gl
    %o = irdl.base @tk::@gl
    %i = irdl.is index
    %r = irdl.is "r"
    %c = irdl.is "c"
    %axis = irdl.any_of(%r, %c)
    irdl.attributes { "axis" = %axis }
    irdl.operands(src: %g, start: %i, size: %i)
    irdl.results(out: %o)
  }
  // Several GPUs (docs/multi-gpu.md). A parallel gl kernel argument (listed
  // in the kernel's tk.peers) is the local rank's buffer of a symmetric
  // allocation; tk.peer gives the gl over rank `rank`'s buffer (same type).
  irdl.operation @peer {
    %g = irdl.base @tk::@gl
    %i = irdl.is index
    irdl.operands(src: %g, rank: %i)
    irdl.results(out: %g)
  }
  // This process's rank and the number of ranks of the kernel's parallel gls.
  irdl.operation @rank {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  irdl.operation @world_size {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  // The calling warp's lane 0 adds `value` to one element of an i32 gl (a
  // flag, usually a peer's) with system-scope release semantics: the warp's
  // earlier writes (TMA stores whose writes it waited for included) are
  // visible to whoever acquires the flag.
  irdl.operation @signal {
    %g = irdl.base @tk::@gl
    %i = irdl.is index
    irdl.operands(flags: %g, b: %i, d: %i, r: %i, c: %i, value: %i)
  }
  // The calling warp waits until the element is at least `value` (a
  // system-scope acquire spin), then may read what the signallers released.
  irdl.operation @wait_signal {
    %g = irdl.base @tk::@gl
    %i = irdl.is index
    irdl.operands(flags: %g, b: %i, d: %i, r: %i, c: %i, value: %i)
  }
  // The size of one dim of a global layout (static or runtime).
  irdl.operation @dim {
    %g = irdl.base @tk::@gl
    %t = irdl.is index
    %b = irdl.is "b"
    %d = irdl.is "d"
    %r = irdl.is "r"
    %c = irdl.is "c"
    %axis = irdl.any_of(%b, %d, %r, %c)
    irdl.attributes { "axis" = %axis }
    irdl.operands(g: %g)
    irdl.results(out: %t)
  }
  // Ragged groups (tk-grid-ordering's decode of a kernel with tk.ragged):
  // group j has min(max(ceil(count[j] / rows), 0), height) row blocks of
  // `span` items each, the groups' items numbered one group after another.
  // Results: the group z holding item t (`groups` past the last item), t's
  // number inside its group, z's row blocks (0 past the end), the total.
  // count[j] is element (0, 0, 0, j) of the i32 gl, 0 past its end.
  irdl.operation @ragged_item {
    %g = irdl.base @tk::@gl
    %t = irdl.is index
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "rows" = %n }
    irdl.operands(count: %g, item: %t, groups: %t, height: %t, span: %t)
    irdl.results(group: %t, rest: %t, blocks: %t, total: %t)
  }
  // Block-level barrier: every warp of the block waits here; with the
  // optional attributes id and warps, the named barrier `id` for `warps` warps.
  irdl.operation @sync {
  }

  // ---- Hopper: mbarriers (in shared memory, from tk.alloc -> !tk.barrier).
  // Arrival counts are counted in warps: one tk.arrive by a warp is `count`
  // arrivals (its lane 0 arrives).
  // Block-collective: thread 0 initialises, then the block synchronises.
  irdl.operation @init_barrier {
    %bar = irdl.base @tk::@barrier
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "count" = %n }
    irdl.operands(bar: %bar)
  }
  irdl.operation @arrive {
    %bar = irdl.base @tk::@barrier
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "count" = %n }
    irdl.operands(bar: %bar)
  }
  // One arrival that also expects `bytes` of asynchronous (TMA) writes.
  irdl.operation @expect_bytes {
    %bar = irdl.base @tk::@barrier
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "bytes" = %n }
    irdl.operands(bar: %bar)
  }
  // The whole warp waits until the barrier's phase with parity `phase`
  // (0 or 1; taken mod 2) has completed.
  irdl.operation @wait {
    %bar = irdl.base @tk::@barrier
    %p = irdl.is index
    irdl.operands(bar: %bar, phase: %p)
  }
  // Orders this thread's ordinary shared-memory writes before later reads by
  // the async proxy (TMA stores, wgmma operands).
  irdl.operation @fence_async {
  }

  // ---- Thread-block clusters (a kernel's tk.cluster): the CTAs of a
  // cluster share their shared memory windows and can signal each other.
  // This CTA's rank in its cluster (%cluster_ctarank, 0 .. size - 1).
  irdl.operation @cluster_ctarank {
    %t = irdl.is index
    irdl.results(out: %t)
  }
  // This CTA's cluster's index in the grid (%clusterid.x/y/z).
  irdl.operation @cluster_idx {
    %t = irdl.is index
    %x = irdl.is "x"
    %y = irdl.is "y"
    %z = irdl.is "z"
    %dim = irdl.any_of(%x, %y, %z)
    irdl.attributes { "dim" = %dim }
    irdl.results(out: %t)
  }
  // Every thread of every CTA of the cluster meets (barrier.cluster
  // arrive.release + wait.acquire): shared-memory writes and barrier inits
  // before it are visible to the cluster's CTAs after it.
  irdl.operation @cluster_sync {
  }
  // The calling warp's lane 0 arrives `count` times on the barrier at the
  // same offset in the shared memory of CTA `cta` of the cluster (mapa +
  // mbarrier.arrive.release.cluster.shared::cluster).
  irdl.operation @arrive_cta {
    %bar = irdl.base @tk::@barrier
    %i = irdl.is index
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "count" = %n }
    irdl.operands(bar: %bar, cta: %i)
  }
  // tma_load delivered to every CTA of the cluster whose bit is set in
  // `mask` (16 bits: CTA ranks): the box lands at dst's offset in each one's
  // shared memory and completes its bytes on the barrier at bar's offset
  // there (cp.async.bulk.tensor ... .multicast::cluster).
  irdl.operation @tma_load_multicast {
    %dst = irdl.any
    %src = irdl.base @tk::@gl
    %i = irdl.is index
    %bar = irdl.base @tk::@barrier
    irdl.operands(dst: %dst, src: %src, idx: variadic %i, bar: %bar, mask: %i)
  }

  // A bulk copy of this CTA's shared tile `src` into `dst`'s place in the
  // shared memory of CTA `cta` of the cluster, its bytes completing on the
  // barrier at bar's place there (distributed shared memory: mapa +
  // cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes).
  // dst and src: whole tiles of one type.
  irdl.operation @tma_store_cta {
    %dst = irdl.any
    %src = irdl.any
    %i = irdl.is index
    %bar = irdl.base @tk::@barrier
    irdl.operands(dst: %dst, src: %src, cta: %i, bar: %bar)
  }

  // ---- Hopper: TMA, issued by lane 0 of the calling warp.
  // gl -> st (or sv: one row; tk-verify checks the kind) at tile coords
  // (b, d, r, c) (unit: its shape); the bytes
  // arrive on `bar` (which must expect them).
  irdl.operation @tma_load {
    %dst = irdl.any
    %src = irdl.base @tk::@gl
    %i = irdl.is index
    %bar = irdl.base @tk::@barrier
    irdl.operands(dst: %dst, src: %src, idx: variadic %i, bar: %bar)
  }
  // A hint: the tile of src at coords (the box of `box`'s type, which is
  // not written) brought into L2 ahead of a later load.
  irdl.operation @tma_prefetch {
    %box = irdl.any
    %src = irdl.base @tk::@gl
    %i = irdl.is index
    irdl.operands(box: %box, src: %src, idx: variadic %i)
  }
  // st -> gl; completion is awaited with tma_store_wait.
  irdl.operation @tma_store {
    %dst = irdl.base @tk::@gl
    %src = irdl.base @tk::@st
    %i = irdl.is index
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }
  // st -> gl adding into the existing values (gl += st).
  irdl.operation @tma_store_add {
    %dst = irdl.base @tk::@gl
    %src = irdl.base @tk::@st
    %i = irdl.is index
    irdl.operands(dst: %dst, src: %src, idx: variadic %i)
  }
  // Wait until at most `pending` of this warp's TMA stores still read shared memory.
  irdl.operation @tma_store_wait {
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "pending" = %n }
  }
  // One atomic add of `value` to an i32 gl element by the block's (or, with
  // id / warps as tk.sync's, the barrier group's) first thread, acq_rel at
  // GPU scope; every thread of the group gets the old value (through the
  // first word of the scratch sv<f32, 16>). Ordered after the group's earlier writes: register
  // stores by the barrier, TMA stores to the `after` gls by the
  // producer/consumer form's waits (tk-pipeline-staging). With `delegated`
  // (tk-pipeline-staging's store warp added, after its stores' writes
  // completed, and left the old value in the scratch before the mbarrier the
  // group waited on) it only reads the scratch.
  // `after = array<i64: ...>` names the `after` gls by their argument numbers:
  // an attribute, not variadic operands, since IRDL binds a variadic's one
  // constraint variable to the type of its first value (gls of different
  // types could not be listed).
  irdl.operation @atomic_add {
    %dst = irdl.base @tk::@gl
    %s = irdl.base @tk::@sv
    %i = irdl.is index
    %r = irdl.is i32
    irdl.operands(dst: %dst, scratch: %s, b: %i, d: %i, r: %i, c: %i)
    irdl.results(old: %r)
  }

  // ---- Hopper: warpgroup (4 consecutive warps) matrix multiply with wgmma.
  // All 4 warps call it. a: rt<16, K> per warp (the warpgroup's 64 x K in
  // registers) or st<64, K> (shared); b: st; c, d: rt<f32, 16, N> per warp
  // (rows 16*w .. 16*w+15 of the 64 x N result). Issues asynchronously and
  // commits one wgmma group; read d only after tk.warpgroup_mma_wait.
  // An optional `negate = true` (a discardable attribute: IRDL declares no
  // optional ones) computes d = -(a @ b) + c (wgmma's imm-scale-a = -1): the
  // minus of a complex product's real part costs nothing.
  // An optional i1 operand `when` guards the mma: where it is false no
  // wgmma runs and d = c, but an (empty) group is still committed, so the
  // waits' group counts do not depend on it.
  irdl.operation @warpgroup_mma_ab {
    %a = irdl.any
    %b = irdl.base @tk::@st
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    %p = irdl.is i1
    irdl.operands(a: %a, b: %b, c: %c, when: optional %p)
    irdl.results(d: %d)
  }
  irdl.operation @warpgroup_mma_abt {
    %a = irdl.any
    %b = irdl.base @tk::@st
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    %p = irdl.is i1
    irdl.operands(a: %a, b: %b, c: %c, when: optional %p)
    irdl.results(d: %d)
  }
  irdl.operation @warpgroup_mma_atb {
    %a = irdl.base @tk::@st
    %b = irdl.base @tk::@st
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    %p = irdl.is i1
    irdl.operands(a: %a, b: %b, c: %c, when: optional %p)
    irdl.results(d: %d)
  }
  irdl.operation @warpgroup_mma_atbt {
    %a = irdl.base @tk::@st
    %b = irdl.base @tk::@st
    %c = irdl.base @tk::@rt
    %d = irdl.base @tk::@rt
    %p = irdl.is i1
    irdl.operands(a: %a, b: %b, c: %c, when: optional %p)
    irdl.results(d: %d)
  }
  // Wait until at most `pending` wgmma groups are in flight; returns the
  // tiles it is given (the accumulators), so their uses come after the wait.
  irdl.operation @warpgroup_mma_wait {
    %t = irdl.base @tk::@rt
    %u = irdl.base @tk::@rt
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "pending" = %n }
    irdl.operands(tiles: variadic %t)
    irdl.results(out: variadic %u)
  }
  // setmaxnreg: the calling warpgroup raises / lowers its per-thread register budget.
  irdl.operation @increase_registers {
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "count" = %n }
  }
  irdl.operation @decrease_registers {
    %n = irdl.base "#builtin.integer"
    irdl.attributes { "count" = %n }
  }
}
