// tk-verify rules of thread-block clusters, each at its line: the kernel's
// tk.cluster (at most 8 CTAs, persistent or ordered only along x and without
// zigzag or ragged items, constant grid dims multiples of it), and the cluster ops (a cluster of several CTAs; a constant CTA or mask
// within it).
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | FileCheck %s
// RUN: not tkc %s --pass-pipeline=tk-verify 2>&1 | count 11
!g = !tk.gl<bf16, 1 : i64, 1 : i64, 128 : i64, 64 : i64>
!s = !tk.st<bf16, 64 : i64, 64 : i64, "128b">

// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @big: tk.cluster [4, 4, 1]: a cluster holds at most 8 CTAs, got 16
func.func @big() attributes {tk.kernel, tk.cluster = array<i64: 4, 4, 1>} {
  return
}

// CHECK: cluster-invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: kernel @looping: tk.cluster is not supported with ragged or zigzag work items yet
// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @looping: tk.cluster [2, 1, 1]: grid dim x = 3 is not a multiple of the cluster's 2
func.func @looping() attributes {tk.kernel, tk.persistent = "zigzag", tk.grid = ["3", "1", "1"], tk.cluster = array<i64: 2, 1, 1>} {
  return
}

// A persistent kernel's x too is whole clusters (tk-grid-ordering pairs items, it pads none).
// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @paired: tk.cluster [2, 1, 1]: grid dim x = 3 is not a multiple of the cluster's 2
func.func @paired() attributes {tk.kernel, tk.persistent, tk.grid = ["3", "1", "1"], tk.cluster = array<i64: 2, 1, 1>} {
  return
}

// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @rows: tk.cluster [1, 2, 1] with tk.persistent: tk-grid-ordering gives a cluster's CTAs one work item along x only
func.func @rows() attributes {tk.kernel, tk.persistent, tk.cluster = array<i64: 1, 2, 1>} {
  return
}

// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @ordered: tk.cluster [1, 2, 1] with tk.order: tk-grid-ordering gives a cluster's CTAs one work item along x only
func.func @ordered() attributes {tk.kernel, tk.order = "yxz", tk.cluster = array<i64: 1, 2, 1>} {
  return
}

// CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: kernel @zero: tk.cluster must be array<i64: cx, cy, cz> with each dim >= 1
func.func @zero() attributes {tk.kernel, tk.cluster = array<i64: 0, 1, 1>} {
  return
}

func.func @alone() attributes {tk.kernel} {
  // CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: cluster_sync: the kernel has no cluster of several CTAs (tk.cluster)
  "tk.cluster_sync"() : () -> ()
  return
}

func.func @pair(%a: !g) attributes {tk.kernel, tk.cluster = array<i64: 2, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %s = "tk.alloc"() : () -> !s
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  // CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: arrive_cta: cta 2 is outside the cluster's CTAs 0..1
  "tk.arrive_cta"(%bar, %c2) {count = 1 : i64} : (!tk.barrier, index) -> ()
  // CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: arrive_cta: count must be an integer >= 1, got 0
  "tk.arrive_cta"(%bar, %c0) {count = 0 : i64} : (!tk.barrier, index) -> ()
  // CHECK: cluster-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: tma_load_multicast: mask 0x4 names CTAs outside the cluster's 0..1 (bits 1..3)
  "tk.tma_load_multicast"(%s, %a, %c0, %c0, %c0, %c0, %bar, %c4) : (!s, !g, index, index, index, index, !tk.barrier, index) -> ()
  return
}
