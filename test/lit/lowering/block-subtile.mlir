// tk.subtile of an st is a view: the parent's Shared moved by whole rows
// (i * R' * S bytes inside each panel of S-byte rows) and whole panels
// (j * C'/P panels, each pitch * S bytes). A row subtile of a multi-panel
// 128b st keeps its parent's panel stride: st<64, 256> rows 64.. of
// st<128, 256> are 4 panels at 8192 + p * 16384 (not p * 8192), moved by one
// 64 x 64 TMA box each. Constant indices fold into static offsets; run-time
// ones add index * bytes (y * 8192 here). A column subtile of a 64b st is
// whole 2048-byte panels further, an unswizzled row subtile whole rows.
// tk.subtile of an rt picks the part's registers: base tile (1, 1) of an
// rt<f32, 32, 32> is the last 8 of its 32 scalars (the last 4 pair loads).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM-LABEL: llvm.func @st_views(
// NVVM-SAME: \22tensor_maps\22: [{\22param\22: 0, \22name\22: \22a\22, \22dtype\22: \22bf16\22, \22box\22: [64, 64], \22swizzle\22: \22128b\22}]
// NVVM-DAG: %[[P0:.*]] = llvm.getelementptr %{{.*}}[8192] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[P1:.*]] = llvm.getelementptr %{{.*}}[24576] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[P2:.*]] = llvm.getelementptr %{{.*}}[40960] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM-DAG: %[[P3:.*]] = llvm.getelementptr %{{.*}}[57344] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// NVVM: %[[D0:.*]] = llvm.addrspacecast %[[P0]] : !llvm.ptr<3> to !llvm.ptr<7>
// NVVM-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D0]]
// NVVM: %[[D1:.*]] = llvm.addrspacecast %[[P1]] : !llvm.ptr<3> to !llvm.ptr<7>
// NVVM: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D1]]
// NVVM: %[[D2:.*]] = llvm.addrspacecast %[[P2]] : !llvm.ptr<3> to !llvm.ptr<7>
// NVVM: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D2]]
// NVVM: %[[D3:.*]] = llvm.addrspacecast %[[P3]] : !llvm.ptr<3> to !llvm.ptr<7>
// NVVM: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[D3]]
// The run-time row index y: y * 64 rows * 128 bytes.
// NVVM: %[[Y:.*]] = arith.muli %[[YIDX:.*]], %c8192 : index
// NVVM: %[[Y32:.*]] = arith.index_cast %[[Y]] : index to i32
// NVVM-NEXT: %[[C1:.*]] = arith.constant 32768 : i32
// NVVM-NEXT: %[[O1:.*]] = arith.addi %[[Y32]], %[[C1]] : i32
// NVVM-NEXT: %[[S1:.*]] = llvm.getelementptr %{{.*}}[%[[O1]]]
// NVVM-NEXT: nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %[[S1]]
// NVVM: %[[C2:.*]] = arith.constant 49152 : i32
// NVVM-NEXT: %[[O2:.*]] = arith.addi %{{.*}}, %[[C2]] : i32
// NVVM-NEXT: %[[S2:.*]] = llvm.getelementptr %{{.*}}[%[[O2]]]
// NVVM: nvvm.cp.async.bulk.tensor.global.shared.cta %{{.*}}, %[[S2]]
// NVVM-NEXT: nvvm.cp.async.bulk.commit.group
// Panel 3 of the 64b st (allocated at 66560): 3 panels of 32 rows * 64 bytes
// further, 72704, the immediate offset of every ldmatrix and stmatrix (its
// second 16 rows 16 x 64 bytes more: 73728).
// NVVM: "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4+72704];"
// NVVM-COUNT-2: "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+72704],
// NVVM-COUNT-2: "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+73728],
// Rows 16 * y.. of the unswizzled f32 st (at 74752): y * 16 rows * 128 bytes.
// NVVM: %[[UB:.*]] = arith.constant 2048 : index
// NVVM-NEXT: %[[U:.*]] = arith.muli %[[YIDX]], %[[UB]] : index
// NVVM: %[[UO:.*]] = arith.constant 74752 : index
// NVVM-NEXT: %[[UA:.*]] = arith.addi %{{.*}}, %[[UO]] : index
// NVVM-NEXT: %[[UA2:.*]] = arith.addi %[[UA]], %[[U]] : index
// NVVM-NEXT: arith.index_cast %[[UA2]] : index to i32
// NVVM: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<1>

// NVVM-LABEL: llvm.func @rt_views(
// NVVM-COUNT-12: llvm.load {{.*}} : !llvm.ptr<1> -> vector<2xf32>
// NVVM: %[[L12:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> vector<2xf32>
// NVVM: %[[X0:.*]] = llvm.extractelement %[[L12]]
// NVVM: %[[X1:.*]] = llvm.extractelement %[[L12]]
// NVVM-COUNT-3: llvm.load {{.*}} : !llvm.ptr<1> -> vector<2xf32>
// NVVM-NOT: llvm.load
// NVVM: llvm.insertelement %[[X0]]
// NVVM: llvm.insertelement %[[X1]]
// NVVM-NEXT: llvm.store
// NVVM-COUNT-3: llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<1>
// NVVM-NOT: llvm.store

// PTX-LABEL: .entry st_views(
// PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: mul.wide.u32 %rd[[Y:[0-9]+]], %r{{[0-9]+}}, 8192;
// PTX-NEXT: add.s64 %rd[[A:[0-9]+]], %rd{{[0-9]+}}, %rd[[Y]];
// PTX-NEXT: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [%rd[[A]]+32768];
// PTX-NEXT: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [%rd[[A]]+49152];

!p = !tk.st<bf16, 128 : i64, 256 : i64, "128b">
!h = !tk.st<bf16, 64 : i64, 256 : i64, "128b">
!q = !tk.st<bf16, 64 : i64, 128 : i64, "128b">
!n = !tk.st<bf16, 32 : i64, 128 : i64, "64b">
!n1 = !tk.st<bf16, 32 : i64, 32 : i64, "64b">
!u = !tk.st<f32, 64 : i64, 32 : i64, "none">
!u1 = !tk.st<f32, 16 : i64, 32 : i64, "none">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>
!r = !tk.rt<bf16, 32 : i64, 32 : i64, "row">
!gf = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 32 : i64>
func.func @st_views(%a: !g, %o: !gf) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "o"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %s = "tk.alloc"() : () -> !p
  %bar = "tk.alloc"() : () -> !tk.barrier
  %ns = "tk.alloc"() : () -> !n
  %us = "tk.alloc"() : () -> !u
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %lo = "tk.subtile"(%s, %c1, %c0) : (!p, index, index) -> !h
  "tk.expect_bytes"(%bar) {bytes = 32768 : i64} : (!tk.barrier) -> ()
  "tk.tma_load"(%lo, %a, %c0, %c0, %c0, %c0, %bar) : (!h, !g, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  %yx = "tk.subtile"(%s, %y, %c1) : (!p, index, index) -> !q
  "tk.tma_store"(%a, %yx, %c0, %c0, %c0, %c0) : (!g, !q, index, index, index, index) -> ()
  %panel = "tk.subtile"(%ns, %c0, %c3) : (!n, index, index) -> !n1
  %x = "tk.load"(%panel, %c0, %c0) : (!n1, index, index) -> !r
  "tk.store"(%panel, %x, %c0, %c0) : (!n1, !r, index, index) -> ()
  %rows = "tk.subtile"(%us, %y, %c0) : (!u, index, index) -> !u1
  "tk.group_store"(%o, %rows, %c0, %c0, %y, %c0) {warps = 4 : i64} : (!gf, !u1, index, index, index, index) -> ()
  return
}

!rt = !tk.rt<f32, 32 : i64, 32 : i64, "row">
!rt1 = !tk.rt<f32, 16 : i64, 16 : i64, "row">
!gi = !tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 32 : i64>
!go = !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>
func.func @rt_views(%a: !gi, %o: !go) attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["a", "o"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!gi, index, index, index, index) -> !rt
  %q = "tk.subtile"(%x, %c1, %c1) : (!rt, index, index) -> !rt1
  "tk.store"(%o, %q, %c0, %c0, %c0, %c0) : (!go, !rt1, index, index, index, index) -> ()
  return
}
