// tk-pipeline-staging: a plain pipelined loop (every warp loads and computes) becomes
// the producer/consumer pipeline of the paper's LCSF template.
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-verify,tk-pipeline-staging,tk-verify | FileCheck %s
// The staged IR is plain tile IR: it lowers and assembles without spills.
// RUN: tkc %s --emit=ptx --kernel gemm | FileCheck %s --check-prefix=PTX

!A = !tk.st<bf16, 128 : i64, 64 : i64, "auto">
!B = !tk.st<bf16, 64 : i64, 256 : i64, "auto">
!W = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!O = !tk.st<bf16, 128 : i64, 256 : i64, "auto">
!C = !tk.rt<f32, 16 : i64, 256 : i64, "row">
!D = !tk.rt<bf16, 16 : i64, 256 : i64, "row">
!G = !tk.gl<bf16, 1 : i64, 1 : i64, -1 : i64, -1 : i64>

// Before: 8 warps (two warpgroups), each warpgroup multiplies its 64 rows of the
// stage's A tile; after the loop the block tile goes out through shared memory.
// The 64 KiB output tile leaves room for 3 stages of 48 KiB (auto).
// CHECK-LABEL: func.func @gemm
// CHECK-SAME: tk.warps = 12
// CHECK: %[[SA:.*]] = "tk.alloc"() {stages = 3 : i64} : () -> !tk.st<bf16, 128 : i64, 64 : i64, "128b">
// CHECK: %[[SB:.*]] = "tk.alloc"() {stages = 3 : i64} : () -> !tk.st<bf16, 64 : i64, 256 : i64, "128b">
// CHECK: %[[SC:.*]] = "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b">
// CHECK: %[[FULL:.*]] = "tk.alloc"() {stages = 3 : i64} : () -> !tk.barrier
// CHECK: %[[EMPTY:.*]] = "tk.alloc"() {stages = 3 : i64} : () -> !tk.barrier
// CHECK: "tk.init_barrier"(%[[FULL]]) {count = 1 : i64}
// CHECK: "tk.init_barrier"(%[[EMPTY]]) {count = 8 : i64}
//   The producer warpgroup (warps 8..11) gives registers away; warp 8 issues.
// CHECK: %[[W:.*]] = "tk.warpid"
// CHECK: %[[PRODUCER:.*]] = arith.cmpi uge, %[[W]], %c8
// CHECK: scf.if %[[PRODUCER]] {
// CHECK:   "tk.decrease_registers"() {count = 40 : i64}
// CHECK:   arith.cmpi eq, %{{.*}}, %c8
// CHECK:   scf.if
// CHECK:     %[[PBM:.*]] = "tk.block_idx"() {dim = "y"}
// CHECK:     %[[PBN:.*]] = "tk.block_idx"() {dim = "x"}
// CHECK:     scf.for %[[PK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PIT:.*]] = %{{.*}}) -> (index) {
//   Slot and phase of a ring of 3 in 32 bits (a 64-bit division costs many instructions a step).
// CHECK:       %[[PI:.*]] = arith.index_castui %[[PIT]] : index to i32
// CHECK:       %[[PS32:.*]] = arith.remui %[[PI]], %c3_i32
// CHECK:       %[[PS:.*]] = arith.index_castui %[[PS32]] : i32 to index
// CHECK:       %[[PI2:.*]] = arith.index_castui %[[PIT]] : index to i32
// CHECK:       %[[PR32:.*]] = arith.divui %[[PI2]], %c3_i32
// CHECK:       %[[PR:.*]] = arith.index_castui %[[PR32]] : i32 to index
// CHECK:       %[[PPH:.*]] = arith.remui %[[PR]], %c2
// CHECK:       %[[PE:.*]] = "tk.stage"(%[[EMPTY]], %[[PS]])
// CHECK:       %[[PARITY:.*]] = arith.addi %[[PPH]], %c1
// CHECK:       "tk.wait"(%[[PE]], %[[PARITY]])
// CHECK:       %[[PF:.*]] = "tk.stage"(%[[FULL]], %[[PS]])
// CHECK:       "tk.expect_bytes"(%[[PF]]) {bytes = 49152 : i64}
// CHECK:       %[[PA:.*]] = "tk.stage"(%[[SA]], %[[PS]])
// CHECK:       "tk.tma_load"(%[[PA]], %arg0, %{{.*}}, %{{.*}}, %[[PBM]], %[[PK]], %[[PF]])
// CHECK:       %[[PB:.*]] = "tk.stage"(%[[SB]], %[[PS]])
// CHECK:       "tk.tma_load"(%[[PB]], %arg1, %{{.*}}, %{{.*}}, %[[PK]], %[[PBN]], %[[PF]])
// CHECK:     } {tk.staged = {role = "producer", stages = 3 : i64}}
//   The consumers (the kernel's 8 warps) take 232 registers each.
// CHECK: } else {
// CHECK:   "tk.increase_registers"() {count = 232 : i64}
// CHECK:   %[[ACC:.*]]:2 = scf.for %[[K:.*]] = %{{.*}} iter_args(%[[X:.*]] = %{{.*}}, %[[IT:.*]] = %{{.*}}) -> (!tk.rt<f32, 16 : i64, 256 : i64, "row">, index) {
// CHECK:     %[[I:.*]] = arith.index_castui %[[IT]] : index to i32
// CHECK:     %[[S32:.*]] = arith.remui %[[I]], %c3_i32
// CHECK:     %[[S:.*]] = arith.index_castui %[[S32]] : i32 to index
// CHECK:     %[[F:.*]] = "tk.stage"(%[[FULL]], %[[S]])
// CHECK:     "tk.wait"(%[[F]],
// CHECK:     %[[A:.*]] = "tk.stage"(%[[SA]], %[[S]])
// CHECK:     %[[B:.*]] = "tk.stage"(%[[SB]], %[[S]])
// CHECK-NOT: tk.pipeline_load
// CHECK:     %[[AW:.*]] = "tk.subtile"(%[[A]],
// CHECK:     %[[Y:.*]] = "tk.warpgroup_mma_ab"(%[[AW]], %[[B]], %[[X]])
//   This iteration's wgmma stays in flight; the previous one's stage is released.
// CHECK:     %[[Z:.*]] = "tk.warpgroup_mma_wait"(%[[Y]]) {pending = 1 : i64}
// CHECK:     %[[LATER:.*]] = arith.cmpi ne, %[[IT]],
// CHECK:     scf.if %[[LATER]] {
// CHECK:       %[[PREV:.*]] = arith.subi %[[IT]], %c1
// CHECK:       %[[PV:.*]] = arith.index_castui %[[PREV]] : index to i32
// CHECK:       %[[PS232:.*]] = arith.remui %[[PV]], %c3_i32
// CHECK:       %[[PS2:.*]] = arith.index_castui %[[PS232]] : i32 to index
// CHECK:       %[[PE2:.*]] = "tk.stage"(%[[EMPTY]], %[[PS2]])
// CHECK:       "tk.arrive"(%[[PE2]]) {count = 1 : i64}
// CHECK:     scf.yield %[[Z]], %{{.*}} : !tk.rt<f32, 16 : i64, 256 : i64, "row">, index
// CHECK:   } {tk.staged = {role = "consumer", stages = 3 : i64}}
// CHECK:   %[[DONE:.*]] = "tk.warpgroup_mma_wait"(%[[ACC]]#0) {pending = 0 : i64}
// CHECK:   scf.if
// CHECK:     "tk.arrive"
// CHECK:   %[[OUT:.*]] = "tk.copy"(%[[DONE]])
// CHECK:   "tk.store"(%[[SC]], %[[OUT]],
//   The store: each warp wrote its own 16-row band of the tile (row wg * 4 + w % 4
//   takes every value of 0..7 once), so each warp fences its writes and stores its
//   band, with no barrier between warps; before the kernel ends, each waits for its
//   store to have read the band.
// CHECK:   "tk.fence_async"()
// CHECK:   "tk.sync"() {warps = 1 : i64}
// CHECK:   %[[BAND:.*]] = "tk.subtile"(%[[SC]], %[[ROW:.*]], %{{.*}}) : {{.*}} -> !tk.st<bf16, 16 : i64, 256 : i64, "128b">
// CHECK:   %[[R8:.*]] = arith.muli %{{.*}}, %c8
// CHECK:   %[[R:.*]] = arith.addi %[[R8]], %[[ROW]]
// CHECK:   "tk.tma_store"(%arg1, %[[BAND]], %{{.*}}, %{{.*}}, %[[R]], %{{.*}})
// CHECK:   "tk.tma_store_wait"() {pending = 0 : i64}
// CHECK-NOT: tk.pipeline_store
// PTX: .maxntid 384, 1, 1
// PTX: setmaxnreg.dec.sync.aligned.u32 {{.*}}40;
// PTX: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: setmaxnreg.inc.sync.aligned.u32 {{.*}}232;
// PTX: wgmma.wait_group.sync.aligned {{.*}}1;
// PTX: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group
// PTX: cp.async.bulk.wait_group.read {{.*}}0;
func.func @gemm(%a: !G, %b: !G) attributes {tk.kernel, tk.warps = 8 : i64, tk.arg_names = ["a", "b"],
    tk.grid = ["b.c // 256", "a.r // 128", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %sa = "tk.alloc"() : () -> !A
  %sb = "tk.alloc"() : () -> !B
  %sc = "tk.alloc"() : () -> !O
  %bn = "tk.block_idx"() {dim = "x"} : () -> index
  %bm = "tk.block_idx"() {dim = "y"} : () -> index
  %wg = "tk.warpgroupid"() : () -> index
  %w = "tk.warpid"() : () -> index
  %kk = "tk.dim"(%a) {axis = "c"} : (!G) -> index
  %n = arith.floordivsi %kk, %c64 : index
  %acc0 = "tk.zero"() : () -> !C
  %acc = scf.for %k = %c0 to %n step %c1 iter_args(%x = %acc0) -> (!C) {
    "tk.pipeline_load"(%sa, %a, %c0, %c0, %bm, %k) : (!A, !G, index, index, index, index) -> ()
    "tk.pipeline_load"(%sb, %b, %c0, %c0, %k, %bn) : (!B, !G, index, index, index, index) -> ()
    %aw = "tk.subtile"(%sa, %wg, %c0) : (!A, index, index) -> !W
    %y = "tk.warpgroup_mma_ab"(%aw, %sb, %x) : (!W, !B, !C) -> !C
    %z = "tk.warpgroup_mma_wait"(%y) {pending = 0 : i64} : (!C) -> !C
    scf.yield %z : !C
  } {tk.pipeline = {stages = 0 : i64}}
  %out = "tk.copy"(%acc) : (!C) -> !D
  %row0 = arith.muli %wg, %c4 : index
  %wr = arith.remui %w, %c4 : index
  %row = arith.addi %row0, %wr : index
  "tk.store"(%sc, %out, %row, %c0) : (!O, !D, index, index) -> ()
  "tk.pipeline_store"(%b, %sc, %c0, %c0, %bm, %bn) : (!G, !O, index, index, index, index) -> ()
  return
}

// A tile the warps write together (a group copy): the whole-tile protocol. Every
// consumer fences, the consumers meet at their named barrier, warp 0 issues the
// store; before the kernel ends warp 0 waits for it to have read the tile.
// CHECK-LABEL: func.func @copy_through
// CHECK-SAME: tk.warps = 8
// CHECK: } else {
// CHECK:   "tk.group_load"(%[[T:.*]], %arg0,
// CHECK:   "tk.fence_async"()
// CHECK:   "tk.sync"() {id = 1 : i64, warps = 4 : i64}
// CHECK:   %[[W0:.*]] = arith.cmpi eq, %{{.*}}, %c0
// CHECK:   scf.if %[[W0]] {
// CHECK:     "tk.tma_store"(%arg1, %[[T]],
// CHECK:   scf.if
// CHECK:     "tk.tma_store_wait"() {pending = 0 : i64}
func.func @copy_through(%a: !G, %c: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c"],
    tk.grid = ["1", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %q = "tk.alloc"() : () -> !W
  %t = "tk.alloc"() : () -> !W
  "tk.pipeline_load"(%q, %a, %c0, %c0, %c0, %c0) : (!W, !G, index, index, index, index) -> ()
  "tk.group_load"(%t, %a, %c0, %c0, %c0, %c1) {warps = 4 : i64} : (!W, !G, index, index, index, index) -> ()
  "tk.pipeline_store"(%c, %t, %c0, %c0, %c0, %c0) : (!G, !W, index, index, index, index) -> ()
  return
}

// Two tiles stored one right after the other (as the attention backward's dK and
// dV): one fence and one meeting follow both tiles' writes, and warp 0 issues
// both stores in one branch; a store after other ops meets again.
// CHECK-LABEL: func.func @two_stores
// CHECK:   "tk.group_load"(%[[T:[^,]*]], %arg0,
// CHECK:   "tk.group_load"(%[[U:[^,]*]], %arg0,
// CHECK:   "tk.fence_async"()
// CHECK-NEXT:   "tk.sync"() {id = 1 : i64, warps = 4 : i64}
// CHECK:   scf.if
// CHECK-NEXT:     "tk.tma_store"(%arg1, %[[T]],
// CHECK-NEXT:     "tk.tma_store"(%arg1, %[[U]],
// CHECK-NEXT:   }
// CHECK-NEXT:   "tk.group_load"(%[[V:[^,]*]], %arg0,
// CHECK-NEXT:   "tk.fence_async"()
// CHECK-NEXT:   "tk.sync"() {id = 1 : i64, warps = 4 : i64}
// CHECK:   scf.if
// CHECK-NEXT:     "tk.tma_store"(%arg1, %[[V]],
// CHECK-NEXT:   }
func.func @two_stores(%a: !G, %c: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c"],
    tk.grid = ["1", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %q = "tk.alloc"() : () -> !W
  %t = "tk.alloc"() : () -> !W
  %u = "tk.alloc"() : () -> !W
  %v = "tk.alloc"() : () -> !W
  "tk.pipeline_load"(%q, %a, %c0, %c0, %c0, %c0) : (!W, !G, index, index, index, index) -> ()
  "tk.group_load"(%t, %a, %c0, %c0, %c0, %c1) {warps = 4 : i64} : (!W, !G, index, index, index, index) -> ()
  "tk.group_load"(%u, %a, %c0, %c0, %c0, %c2) {warps = 4 : i64} : (!W, !G, index, index, index, index) -> ()
  "tk.pipeline_store"(%c, %t, %c0, %c0, %c0, %c0) : (!G, !W, index, index, index, index) -> ()
  "tk.pipeline_store"(%c, %u, %c0, %c0, %c0, %c1) : (!G, !W, index, index, index, index) -> ()
  "tk.group_load"(%v, %a, %c0, %c0, %c1, %c0) {warps = 4 : i64} : (!W, !G, index, index, index, index) -> ()
  "tk.pipeline_store"(%c, %v, %c0, %c0, %c0, %c2) : (!G, !W, index, index, index, index) -> ()
  return
}

// One consumer warpgroup alone on the SM already has 255 registers: no setmaxnreg.
// At two blocks an SM each launches with 128 a thread, so the producer gives its
// spare ones to the consumer warpgroup: 40 + 216 = 2 x 128.
// CHECK-LABEL: func.func @one_consumer
// CHECK-NOT: increase_registers
// CHECK-LABEL: func.func @one_consumer_two_blocks
// CHECK: "tk.decrease_registers"() {count = 40 : i64}
// CHECK: "tk.increase_registers"() {count = 216 : i64}
// At eight blocks an SM a thread launches with 32, fewer than the producer's 40: no
// split (setmaxnreg.dec to 40 would raise the producer's count; ptxas refused it).
// CHECK-LABEL: func.func @one_consumer_eight_blocks
// CHECK-NOT: _registers
// CHECK: return
func.func @one_consumer(%a: !G, %c: !G) attributes {tk.kernel, tk.warps = 4 : i64, tk.arg_names = ["a", "c"],
    tk.grid = ["1", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %q = "tk.alloc"() : () -> !W
  scf.for %k = %c0 to %c4 step %c1 {
    "tk.pipeline_load"(%q, %a, %c0, %c0, %c0, %k) : (!W, !G, index, index, index, index) -> ()
    %x = "tk.load"(%q, %c0, %c0) : (!W, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
    "tk.store"(%c, %x, %c0, %c0, %c0, %k) : (!G, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  } {tk.pipeline = {stages = 2 : i64}}
  return
}

func.func @one_consumer_two_blocks(%a: !G, %c: !G) attributes {tk.kernel, tk.warps = 4 : i64,
    tk.blocks_per_sm = 2 : i64, tk.arg_names = ["a", "c"], tk.grid = ["1", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %q = "tk.alloc"() : () -> !W
  scf.for %k = %c0 to %c4 step %c1 {
    "tk.pipeline_load"(%q, %a, %c0, %c0, %c0, %k) : (!W, !G, index, index, index, index) -> ()
    %x = "tk.load"(%q, %c0, %c0) : (!W, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
    "tk.store"(%c, %x, %c0, %c0, %c0, %k) : (!G, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  } {tk.pipeline = {stages = 2 : i64}}
  return
}

func.func @one_consumer_eight_blocks(%a: !G, %c: !G) attributes {tk.kernel, tk.warps = 4 : i64,
    tk.blocks_per_sm = 8 : i64, tk.arg_names = ["a", "c"], tk.grid = ["1", "1", "1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %q = "tk.alloc"() : () -> !W
  scf.for %k = %c0 to %c4 step %c1 {
    "tk.pipeline_load"(%q, %a, %c0, %c0, %c0, %k) : (!W, !G, index, index, index, index) -> ()
    %x = "tk.load"(%q, %c0, %c0) : (!W, index, index) -> !tk.rt<bf16, 16 : i64, 64 : i64, "row">
    "tk.store"(%c, %x, %c0, %c0, %c0, %k) : (!G, !tk.rt<bf16, 16 : i64, 64 : i64, "row">, index, index, index, index) -> ()
  } {tk.pipeline = {stages = 2 : i64}}
  return
}
