// tk.atomic_add: the group meets, its first thread adds (atom.acq_rel.gpu:
// release of the group's earlier writes, acquire of the blocks' before it)
// and leaves the old value in the scratch, the group meets again and every
// thread reads it. {delegated}: another warp added (tk-pipeline-staging's
// store warp): only the read. tk.tma_store_wait {writes}: cp.async.bulk's
// wait for the writes, not only the reads. `after` names gl arguments by
// number, of any types (here an f32 and a bf16 gl).
// RUN: tkc %s --emit=ptx | FileCheck %s

// CHECK-LABEL: .entry counted(
// CHECK: cp.async.bulk.wait_group 0;
// CHECK: bar.sync 0;
// CHECK: setp.ne.b32 {{.*}}, 0;
// CHECK: atom.acq_rel.gpu.global.add.u32 [[OLD:%r[0-9]+]], [{{%rd[0-9]+}}], {{%r[0-9]+}};
// CHECK: st.shared.b32 [__tkc_shared], [[OLD]];
// CHECK: bar.sync 0;
// CHECK: ld.shared.b32 {{%r[d]?[0-9]+}}, [__tkc_shared];
// CHECK-LABEL: .entry delegated(
// CHECK-NOT: atom.
// CHECK-NOT: bar.sync
// CHECK: ld.shared.b32 {{%r[d]?[0-9]+}}, [__tkc_shared];
// CHECK-NOT: atom.
func.func @counted(%g: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, %h: !tk.gl<bf16, 1 : i64, 2 : i64, 16 : i64, 64 : i64>) attributes {tk.kernel, tk.warps = 4 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64>
  %c0 = arith.constant 0 : index
  "tk.tma_store_wait"() {pending = 0 : i64, writes} : () -> ()
  %old = "tk.atomic_add"(%g, %s, %c0, %c0, %c0, %c0) {value = 1 : i64, after = array<i64: 1, 2>} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.sv<f32, 16 : i64>, index, index, index, index) -> i32
  %f = arith.sitofp %old : i32 to f32
  "tk.store"(%o, %f, %c0, %c0, %c0, %c0) {clip, elements} : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, f32, index, index, index, index) -> ()
  return
}

func.func @delegated(%g: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, %o: !tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel, tk.warps = 4 : i64} {
  %s = "tk.alloc"() : () -> !tk.sv<f32, 16 : i64>
  %c0 = arith.constant 0 : index
  %old = "tk.atomic_add"(%g, %s, %c0, %c0, %c0, %c0) {value = 1 : i64, delegated} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, !tk.sv<f32, 16 : i64>, index, index, index, index) -> i32
  %f = arith.sitofp %old : i32 to f32
  "tk.store"(%o, %f, %c0, %c0, %c0, %c0) {clip, elements} : (!tk.gl<f32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, f32, index, index, index, index) -> ()
  return
}
