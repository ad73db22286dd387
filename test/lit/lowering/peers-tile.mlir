// tk.peer on a parallel gl (tk.peers) lowers to a select among the peer
// pointers by rank; a register store through it writes there; tk.rank and
// tk.world_size read the first parallel gl's parameters.
// RUN: tkc %s --emit=ptx | FileCheck %s
// CHECK-LABEL: .entry poke(
// CHECK: ld.param.b32 [[RANK:%r[0-9]+]], [poke_param_9];
// CHECK: setp.eq.b32 {{%p[0-9]+}}, [[RANK]]
// CHECK: selp.b64
// CHECK: st.global.b32
func.func @poke(%g: !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>) attributes {tk.kernel, tk.warps = 1 : i64, tk.peers = array<i64: 0>} {
  %c0 = arith.constant 0 : index
  %r = "tk.rank"() : () -> index
  %n = "tk.world_size"() : () -> index
  %p = "tk.peer"(%g, %r) : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, index) -> !tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>
  %v = arith.index_cast %n : index to i32
  "tk.store"(%p, %v, %c0, %c0, %c0, %c0) {clip, elements} : (!tk.gl<i32, 1 : i64, 1 : i64, 1 : i64, 16 : i64>, i32, index, index, index, index) -> ()
  return
}
