// The warp ids ptxas can prove warp-uniform (tk.uniform_ids, from tkc.kernel's
// uniform_ids): without it tk.warpid and tk.warpgroupid derive from tid / 32 in
// each lane; with "warpgroup" tk.warpgroupid comes from the warp id broadcast
// from lane 0 (shfl.sync.idx); with "warp" tk.warpid too.
// RUN: tkc %s --emit=nvvm | FileCheck %s

// CHECK-LABEL: llvm.func @plain_warp(
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[W:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK-NEXT: arith.index_cast %[[W]] : i32 to index
// CHECK-NOT: nvvm.shfl.sync
func.func @plain_warp(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64} {
  %w = "tk.warpid"() : () -> index
  %c0 = arith.constant 0 : index
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

// CHECK-LABEL: llvm.func @plain_group(
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[W:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK-NEXT: %[[WI:.*]] = arith.index_cast %[[W]] : i32 to index
// CHECK: arith.divui %[[WI]], %{{.*}} : index
// CHECK-NOT: nvvm.shfl.sync
func.func @plain_group(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64} {
  %w = "tk.warpgroupid"() : () -> index
  %c0 = arith.constant 0 : index
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

// CHECK-LABEL: llvm.func @group(
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[W:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK: %[[U:.*]] = nvvm.shfl.sync idx %{{.*}}, %[[W]], %{{.*}}, %{{.*}} : i32 -> i32
// CHECK-NEXT: %[[UI:.*]] = arith.index_cast %[[U]] : i32 to index
// CHECK: arith.divui %[[UI]], %{{.*}} : index
func.func @group(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64, tk.uniform_ids = "warpgroup"} {
  %w = "tk.warpgroupid"() : () -> index
  %c0 = arith.constant 0 : index
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

// a "warpgroup" kernel's warpid stays per lane
// CHECK-LABEL: llvm.func @group_warp(
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[W:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK-NEXT: arith.index_cast %[[W]] : i32 to index
// CHECK-NOT: nvvm.shfl.sync
func.func @group_warp(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64, tk.uniform_ids = "warpgroup"} {
  %w = "tk.warpid"() : () -> index
  %c0 = arith.constant 0 : index
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

// CHECK-LABEL: llvm.func @warp(
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[W:.*]] = arith.divui %[[TID]], %{{.*}} : i32
// CHECK: %[[U:.*]] = nvvm.shfl.sync idx %{{.*}}, %[[W]], %{{.*}}, %{{.*}} : i32 -> i32
// CHECK-NEXT: %[[UI:.*]] = arith.index_cast %[[U]] : i32 to index
func.func @warp(%g: !tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, %x: f32) attributes {tk.kernel, tk.warps = 8 : i64, tk.uniform_ids = "warp"} {
  %w = "tk.warpid"() : () -> index
  %c0 = arith.constant 0 : index
  %v = "tk.fill"(%x) : (f32) -> !tk.rv<f32, 16 : i64, "row">
  "tk.store"(%g, %v, %c0, %c0, %w, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, -1 : i64, 16 : i64>, !tk.rv<f32, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
