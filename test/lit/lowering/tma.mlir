// TMA: a 64x128 bf16 st with a 128-byte swizzle is two 64x64 panels, so one
// cp.async.bulk.tensor per panel (the second 64 columns further, 8 KiB
// further in shared memory), completing on the mbarrier; stores and
// reduce-adds likewise, then one commit_group; store_wait is wait_group.read
// by lane 0 and a warp sync. a and o share a box and swizzle but are two gl
// arguments: two tensor maps, passed after the regular parameters as
// 128-byte, 64-aligned grid constants, listed in the manifest.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=LOAD < %t.ptx
// RUN: ptxas -arch=sm_90a %t.ptx -o %t.cubin

// NVVM: %arg5: i32, %arg6: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// NVVM-SAME: %arg7: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// NVVM-SAME: \22tensor_maps\22: [{\22param\22: 0, \22name\22: \22a\22, \22dtype\22: \22bf16\22, \22box\22: [64, 64], \22swizzle\22: \22128b\22}, {\22param\22: 1, \22name\22: \22o\22, \22dtype\22: \22bf16\22, \22box\22: [64, 64], \22swizzle\22: \22128b\22}]
// NVVM-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg6, %{{.*}}, box[
// NVVM-COUNT-2: nvvm.cp.async.bulk.tensor.global.shared.cta %arg7
// NVVM-NEXT: nvvm.cp.async.bulk.commit.group
// NVVM-COUNT-2: nvvm.cp.async.bulk.tensor.reduce %arg7, {{.*}} {redKind = #nvvm.tma_redux_kind<add>}
// NVVM-NEXT: nvvm.cp.async.bulk.commit.group
// NVVM: nvvm.cp.async.bulk.wait_group 1 {read}
// NVVM: nvvm.bar.warp.sync

// PTX: .entry tma_copy(
// PTX: .param .u32 tma_copy_param_5,
// PTX-NEXT: .param .align 64 .b8 tma_copy_param_6[128],
// PTX-NEXT: .param .align 64 .b8 tma_copy_param_7[128]
// PTX: mov.b64 %rd[[O:[0-9]+]], tma_copy_param_7;
// PTX: cvta.param.u64 %rd[[OMAP:[0-9]+]], %rd[[O]];
// PTX: mov.b64 %rd[[A:[0-9]+]], tma_copy_param_6;
// PTX: cvta.param.u64 %rd[[AMAP:[0-9]+]], %rd[[A]];
// PTX: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [__tkc_shared+16384], %r{{[0-9]+}};
// PTX: shl.b32 %r[[C0:[0-9]+]], %r{{[0-9]+}}, 7;
// PTX: shl.b32 %r[[R0:[0-9]+]], %r{{[0-9]+}}, 6;
// PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd[[AMAP]], {%r[[C0]], %r[[R0]], %r{{[0-9]+}}, %r{{[0-9]+}}}], [__tkc_shared+16384];
// PTX: or.b32 %r[[C1:[0-9]+]], %r[[C0]], 64;
// PTX: add.s64 %rd{{[0-9]+}}, %rd{{[0-9]+}}, 8192;
// PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd{{[0-9]+}}], [%rd[[AMAP]], {%r[[C1]], %r[[R0]], %r{{[0-9]+}}, %r{{[0-9]+}}}], [__tkc_shared+16384];
// PTX: mbarrier.try_wait.parity.shared::cta.b64
// PTX: fence.proxy.async.shared::cta;
// PTX: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd[[OMAP]], {{.*}}], [__tkc_shared];
// PTX: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%rd[[OMAP]], {{.*}}], [__tkc_shared+8192];
// PTX: cp.async.bulk.commit_group;
// PTX: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%rd[[OMAP]]
// PTX: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%rd[[OMAP]]
// PTX: cp.async.bulk.commit_group;
// PTX: cp.async.bulk.wait_group.read 1;
// PTX: bar.warp.sync -1;
// LOAD-COUNT-2: cp.async.bulk.tensor.4d.shared::cluster.global
// LOAD-NOT: cp.async.bulk.tensor.4d.shared::cluster.global
func.func @tma_copy(%a: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, %o: !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>)
    attributes {tk.kernel, tk.warps = 1 : i64, tk.arg_names = ["a", "o"]} {
  %s = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 128 : i64, "128b">
  %bar = "tk.alloc"() : () -> !tk.barrier
  "tk.init_barrier"(%bar) {count = 1 : i64} : (!tk.barrier) -> ()
  %c0 = arith.constant 0 : index
  %x = "tk.block_idx"() {dim = "x"} : () -> index
  %y = "tk.block_idx"() {dim = "y"} : () -> index
  "tk.expect_bytes"(%bar) {bytes = 16384 : i64} : (!tk.barrier) -> ()
  "tk.tma_load"(%s, %a, %c0, %c0, %y, %x, %bar) : (!tk.st<bf16, 64 : i64, 128 : i64, "128b">, !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, index, index, index, index, !tk.barrier) -> ()
  "tk.wait"(%bar, %c0) : (!tk.barrier, index) -> ()
  "tk.fence_async"() : () -> ()
  "tk.tma_store"(%o, %s, %c0, %c0, %y, %x) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, !tk.st<bf16, 64 : i64, 128 : i64, "128b">, index, index, index, index) -> ()
  "tk.tma_store_add"(%o, %s, %c0, %c0, %y, %x) : (!tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>, !tk.st<bf16, 64 : i64, 128 : i64, "128b">, index, index, index, index) -> ()
  "tk.tma_store_wait"() {pending = 1 : i64} : () -> ()
  return
}
