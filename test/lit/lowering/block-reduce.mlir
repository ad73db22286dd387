// tk.block_sum / block_max / block_min: every lane writes its scalars into
// the scratch (16-byte stores where its count allows), the group meets, and
// every lane reads the warps' scalars at its own positions and combines
// them in warp order. Inside a loop the group first meets once more (the
// previous run's reads are done before the scratch is overwritten); with
// tk.sync's id / warps the meetings are that named barrier's.
// RUN: tkc %s --emit=ptx | FileCheck %s

// A "col" rv of 16 rows: 2 scalars a lane (v2 accesses), 4 warps; the sum is
// ((w0 + w1) + w2) + w3, 256 bytes (32 lanes x 2 x 4 bytes) a warp apart.
// CHECK-LABEL: .entry rows(
// CHECK-NOT: bar.sync
// CHECK: st.shared.v2.b32 [[[MINE:%rd[0-9]+]]], {
// CHECK-NEXT: bar.sync 0;
// CHECK-NEXT: ld.shared.v2.b32 {[[A0:%r[0-9]+]], [[A1:%r[0-9]+]]}, [[[LANE:%rd[0-9]+]]];
// CHECK-NEXT: ld.shared.v2.b32 {[[B0:%r[0-9]+]], [[B1:%r[0-9]+]]}, [[[LANE]]+256];
// CHECK-NEXT: add.rn.f32 [[S0:%r[0-9]+]], [[A0]], [[B0]];
// CHECK-NEXT: add.rn.f32 [[S1:%r[0-9]+]], [[A1]], [[B1]];
// CHECK-NEXT: ld.shared.v2.b32 {[[C0:%r[0-9]+]], [[C1:%r[0-9]+]]}, [[[LANE]]+512];
// CHECK-NEXT: add.rn.f32 {{%r[0-9]+}}, [[S0]], [[C0]];
// CHECK-NEXT: add.rn.f32 {{%r[0-9]+}}, [[S1]], [[C1]];
// CHECK-NEXT: ld.shared.v2.b32 {{.*}}, [[[LANE]]+768];
// CHECK-NOT: bar.sync
// CHECK: ret;
func.func @rows(%x: !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel, tk.warps = 4 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 256 : i64>
  %c0 = arith.constant 0 : index
  %w = "tk.warpid"() : () -> index
  %t = "tk.load"(%x, %c0, %c0, %c0, %w) : (!tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>, index, index, index, index) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %r = "tk.row_sum"(%t) : (!tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rv<f32, 16 : i64, "col">
  %b = "tk.block_sum"(%r, %s) : (!tk.rv<f32, 16 : i64, "col">, !tk.sv<f32, 256 : i64>) -> !tk.rv<f32, 16 : i64, "col">
  "tk.store"(%o, %b, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "col">, index, index, index, index) -> ()
  return
}

// An f32 scalar in a loop: one word a lane, a meeting before the writes and
// one after; max.f32 (a NaN loses to a number, as maxnum).
// CHECK-LABEL: .entry looped(
// CHECK: bar.sync 0;
// CHECK-NEXT: st.shared.b32
// CHECK-NEXT: bar.sync 0;
// CHECK: ld.shared.b32 [[M0:%r[0-9]+]], [[[L:%rd[0-9]+]]];
// CHECK-NEXT: ld.shared.b32 [[M1:%r[0-9]+]], [[[L]]+128];
// CHECK-NEXT: max.f32 {{%r[0-9]+}}, [[M0]], [[M1]];
func.func @looped(%o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, %n: i32) attributes {tk.kernel, tk.warps = 2 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 64 : i64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %w = "tk.warpid"() : () -> index
  %wi = arith.index_cast %w : index to i32
  %x = arith.sitofp %wi : i32 to f32
  %m = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (f32) {
    %b = "tk.block_max"(%acc, %s) : (f32, !tk.sv<f32, 64 : i64>) -> f32
    scf.yield %b : f32
  }
  "tk.store"(%o, %m, %c0, %c0, %c0, %c0) {clip, elements} : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, f32, index, index, index, index) -> ()
  return
}

// The group of warps 0..3 of an 8-warp block on named barrier 1 (what
// tk-pipeline-staging makes of a reduction by its consumers): bar.sync 1, 128;
// a flat rv of 128: 4 scalars a lane, one v4 access.
// CHECK-LABEL: .entry group(
// CHECK: st.shared.v4.b32
// CHECK-NEXT: bar.sync 1, 128;
// CHECK: ld.shared.v4.b32
// CHECK-NEXT: ld.shared.v4.b32 {{.*}}+512];
// CHECK-NEXT: min.f32
func.func @group(%x: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 128 : i64>) attributes {tk.kernel, tk.warps = 8 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 512 : i64>
  %c0 = arith.constant 0 : index
  %w = "tk.warpid"() : () -> index
  %c4 = arith.constant 4 : index
  %lo = arith.cmpi ult, %w, %c4 : index
  scf.if %lo {
    %v = "tk.load"(%x, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 128 : i64>, index, index, index, index) -> !tk.rv<f32, 128 : i64, "flat">
    %b = "tk.block_min"(%v, %s) {id = 1 : i64, warps = 4 : i64} : (!tk.rv<f32, 128 : i64, "flat">, !tk.sv<f32, 512 : i64>) -> !tk.rv<f32, 128 : i64, "flat">
    "tk.store"(%x, %b, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 128 : i64>, !tk.rv<f32, 128 : i64, "flat">, index, index, index, index) -> ()
  }
  return
}
