// wgmma on subtile views keeps the parent's panel layout. abt_rows: A is rows
// 64..127 of a 2-panel 128b st<128, 128> (K-major, K = 128): its k16 steps
// start at 8192 + 0, 32, 64, 96, then cross to the second panel at
// 8192 + 128 * 128 (the parent's pitch), not 8192 + 64 * 128. ab_rows: B is
// rows 64y.. of a 4-panel st<128, 256> (MN-major, N = 256): LBO is the
// parent's panel stride 128 * 128 = 16384 (in the constant low word's bits
// 16-29), and the run-time row index y adds y * 8192 >> 4 to the shared
// array's address field. Each wgmma's descriptors are that field plus a
// constant (strides, swizzle, static offset and k step >> 4) put in inside
// its asm: one value stays live in a loop, not one per operand and step.
// The descriptor is joined from its 32-bit words (the field plus the
// constant's low word; the constant's high word: SBO, swizzle), never one
// 64-bit add of the constant, whose high word ptxas 12.9/13.0 drop when the
// field has a run-time part (ab_rows' y) and two wgmmas read it.
// ptxas assembles both without spills, and every HGMMA's descriptor
// registers are set (SASS: tkc.sass.unset_descriptor_registers).
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTX-LABEL: .entry abt_rows(
// PTX: mov.b64 %rd[[BASE:[0-9]+]], __tkc_shared;
// PTX-NEXT: cvt.u32.u64 %r[[B:[0-9]+]], %rd[[BASE]];
// PTX-NEXT: shr.u32 %r[[S:[0-9]+]], %r[[B]], 4;
// PTX-NEXT: and.b32 %r[[F:[0-9]+]], %r[[S]], 16320;
// K-major 128B: the high word SBO 1024 >> 4 = 64 and mode 1 (1 << 30):
// 1073741888; the low word LBO 1 (unused) << 16 = 65536 plus the start >> 4:
// A at 8192 (+ 512), B at 32768 (+ 2048).
// PTX: add.u32 %tkl0, %r[[F]], 66048;
// PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
// PTX-NEXT: add.u32 %tkl1, %r[[F]], 67584;
// PTX-NEXT: mov.b64 %tkd1, {%tkl1, 1073741888};
// PTX-NEXT: wgmma.mma_async{{.*}}, %tkd0, %tkd1, 1, 1, 1, 0, 0;
// PTX: add.u32 %tkl0, %r[[F]], 66050;
// PTX: wgmma.mma_async
// PTX: add.u32 %tkl0, %r[[F]], 66052;
// PTX: wgmma.mma_async
// PTX: add.u32 %tkl0, %r[[F]], 66054;
// PTX: wgmma.mma_async
// The second panel: 8192 + 16384 = (8192 + 1024 * 16).
// PTX: add.u32 %tkl0, %r[[F]], 67072;
// PTX: wgmma.mma_async
// PTX: add.u32 %tkl0, %r[[F]], 67074;
// PTX-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.commit_group.sync.aligned;

// PTX-LABEL: .entry ab_rows(
// PTX: mov.u32 %r[[Y:[0-9]+]], %ctaid.y;
// PTX: mov.b64 %rd[[BASE:[0-9]+]], __tkc_shared;
// PTX-NEXT: cvt.u32.u64 %r[[B:[0-9]+]], %rd[[BASE]];
// PTX-NEXT: shr.u32 %r[[S:[0-9]+]], %r[[B]], 4;
// PTX-NEXT: and.b32 %r[[F:[0-9]+]], %r[[S]], 16320;
// PTX: shl.b32 %r[[DY:[0-9]+]], %r[[Y]], 9;
// PTX: add.s32 %r[[START:[0-9]+]], %r[[F]], %r[[DY]];
// The low word: LBO 16384 >> 4 = 1024 in bits 16-29; the k16 steps: 16 rows
// of 128 bytes each, 2048 / 16 = 128 a step. The high word: SBO, 128B.
// PTX: add.u32 %tkl0, %r[[START]], 67108864;
// PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
// PTX: add.u32 %tkl0, %r[[START]], 67108992;
// PTX: add.u32 %tkl0, %r[[START]], 67109120;
// PTX: add.u32 %tkl0, %r[[START]], 67109248;
// PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
// A in registers, B MN-major (tnspB = 1): the 4th and last k step.
// PTX-NEXT: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %tkd0, 1, 1, 1, 1;
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.commit_group.sync.aligned;

// PTXAS-COUNT-2: 0 bytes spill stores, 0 bytes spill loads

!p = !tk.st<bf16, 128 : i64, 128 : i64, "128b">
!a = !tk.st<bf16, 64 : i64, 128 : i64, "128b">
!b = !tk.st<bf16, 128 : i64, 128 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 128 : i64, "row">
!gc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 128 : i64>
func.func @abt_rows(%c: !gc) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["c"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %sp = "tk.alloc"() : () -> !p
  %sb = "tk.alloc"() : () -> !b
  %lo = "tk.subtile"(%sp, %c1, %c0) : (!p, index, index) -> !a
  %z = "tk.zero"() : () -> !acc
  %d = "tk.warpgroup_mma_abt"(%lo, %sb, %z) : (!a, !b, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  return
}

!pb = !tk.st<bf16, 128 : i64, 256 : i64, "128b">
!bb = !tk.st<bf16, 64 : i64, 256 : i64, "128b">
!ra = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
!acc2 = !tk.rt<f32, 16 : i64, 256 : i64, "row">
!ga = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!gc2 = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 256 : i64>
func.func @ab_rows(%a: !ga, %c: !gc2) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c"]} {
  %c0 = arith.constant 0 : index
  %sp = "tk.alloc"() : () -> !pb
  %w = "tk.warpid"() : () -> index
  %x = "tk.load"(%a, %c0, %c0, %w, %c0) : (!ga, index, index, index, index) -> !ra
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %rows = "tk.subtile"(%sp, %y, %c0) : (!pb, index, index) -> !bb
  %z = "tk.zero"() : () -> !acc2
  %d = "tk.warpgroup_mma_ab"(%x, %rows, %z) : (!ra, !bb, !acc2) -> !acc2
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc2) -> !acc2
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gc2, !acc2, index, index, index, index) -> ()
  return
}
