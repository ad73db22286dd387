// Warpgroup mma lowering: a shared-A mma_ABt (two K-major descriptors, tnspA
// = tnspB = 0), a register-A mma_AB (4 b32 A registers, N-major B: tnspB = 1,
// N = 256), a transposed-A mma_AtB (tnspA = 1), negated products (register
// and shared A: imm-scale-a = -1), the wait, and setmaxnreg with one block
// per SM; ptxas assembles the result without spills.
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tkc %s --emit=ptx > %t.ptx && ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// NVVM-LABEL: llvm.func @abt(
// The op's wgmma.fence and 4 k16 steps are one inline asm: its accumulators are
// operands once, and the fence follows every write to them (they are computed before it).
// NVVM-NOT: nvvm.wgmma.fence.aligned
// NVVM: llvm.inline_asm has_side_effects "{{[^"]*}}wgmma.fence.sync.aligned;{{[^"]*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{[^"]*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{[^"]*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{[^"]*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{[^"]*}}, 1, 1, 1, 0, 0;{{[^"]*}}"
// NVVM-NOT: wgmma.mma_async
// NVVM: nvvm.wgmma.commit.group.sync.aligned
// NVVM: nvvm.wgmma.wait.group.sync.aligned 0
// NVVM-LABEL: llvm.func @ab_registers(
// NVVM-SAME: nvvm.minctasm = 1 : i32
// NVVM: nvvm.setmaxregister decrease 40
// NVVM: nvvm.setmaxregister increase 232

// PTX-LABEL: .entry abt(
// PTX-NOT: .minnctapersm
// PTX: wgmma.fence.sync.aligned;
// The descriptors: the shared array's address field (32 bits), once, plus a
// constant put in inside each wgmma's asm (%tkdN), as 32-bit words: the low
// word the field plus LBO 1 (unused) << 16 and the operand's offset plus k
// step >> 4 (B lives at 8192: + 512; a k step is 32 bytes: + 2); the high
// word SBO 1024 >> 4 = 64 and mode 1 << 30 (no 64-bit add: see wgmma.py).
// PTX: add.u32 %tkl0, [[F:%r[0-9]+]], 65536;
// PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
// PTX-NEXT: add.u32 %tkl1, [[F]], 66048;
// PTX-NEXT: mov.b64 %tkd1, {%tkl1, 1073741888};
// PTX-NEXT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{(%r[0-9]+, ){63}%r[0-9]+}}}, %tkd0, %tkd1, 1, 1, 1, 0, 0;
// PTX: add.u32 %tkl0, [[F]], 65538;
// PTX-NEXT: mov.b64 %tkd0, {%tkl0, 1073741888};
// PTX-NEXT: add.u32 %tkl1, [[F]], 66050;
// PTX-COUNT-3: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{(%r[0-9]+, ){63}%r[0-9]+}}}, %tkd0, %tkd1, 1, 1, 1, 0, 0;
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NEXT: wgmma.wait_group.sync.aligned {{[ \t]*}}1;
// PTX: wgmma.wait_group.sync.aligned {{[ \t]*}}0;
// PTX-LABEL: .entry ab_registers(
// PTX: .maxntid 256, 1, 1
// PTX-NEXT: .minnctapersm 1
// PTX: setmaxnreg.inc.sync.aligned.u32 {{[ \t]*}}232;
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-2: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{{(%r[0-9]+, ){127}%r[0-9]+}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %tkd{{[0-9]+}}, 1, 1, 1, 1;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: setmaxnreg.dec.sync.aligned.u32 {{[ \t]*}}40;
// PTX-LABEL: .entry atb(
// PTX-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %tkd{{[0-9]+}}, %tkd{{[0-9]+}}, 1, 1, 1, 1, 1;

// PTX-LABEL: .entry negated(
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %tkd{{[0-9]+}}, 1, -1, 1, 1;
// PTX-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %tkd{{[0-9]+}}, %tkd{{[0-9]+}}, 1, -1, 1, 1, 1;

// PTXAS-NOT: C75{{0[78]}}
// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: C75{{0[78]}}

!sa = !tk.st<bf16, 64 : i64, 64 : i64, "128b">
!sb = !tk.st<bf16, 128 : i64, 64 : i64, "128b">
!acc = !tk.rt<f32, 16 : i64, 128 : i64, "row">
!ga = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!gb = !tk.gl<bf16, 1 : i64, 1 : i64, 128 : i64, 64 : i64>
!gc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 128 : i64>
func.func @abt(%a: !ga, %b: !gb, %c: !gc) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %sa = "tk.alloc"() : () -> !sa
  %sb = "tk.alloc"() : () -> !sb
  "tk.group_load"(%sa, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!sa, !ga, index, index, index, index) -> ()
  "tk.group_load"(%sb, %b, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!sb, !gb, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %z = "tk.zero"() : () -> !acc
  %d = "tk.warpgroup_mma_abt"(%sa, %sb, %z) : (!sa, !sb, !acc) -> !acc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 1 : i64} : (!acc) -> !acc
  %f = "tk.warpgroup_mma_wait"(%e) {pending = 0 : i64} : (!acc) -> !acc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %f, %c0, %c0, %w, %c0) : (!gc, !acc, index, index, index, index) -> ()
  return
}

!xb = !tk.st<f16, 32 : i64, 256 : i64, "auto">
!x = !tk.rt<f16, 16 : i64, 32 : i64, "row">
!acc2 = !tk.rt<f32, 16 : i64, 256 : i64, "row">
!gx = !tk.gl<f16, 1 : i64, 1 : i64, 64 : i64, 32 : i64>
!gxb = !tk.gl<f16, 1 : i64, 1 : i64, 32 : i64, 256 : i64>
!gxc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 256 : i64>
func.func @ab_registers(%a: !gx, %b: !gxb, %c: !gxc) attributes {tk.kernel, tk.warps = 8 : i64} {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %sb = "tk.alloc"() : () -> !xb
  "tk.group_load"(%sb, %b, %c0, %c0, %c0, %c0) {warps = 8 : i64} : (!xb, !gxb, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %g = "tk.warpgroupid"() : () -> index
  %producer = arith.cmpi eq, %g, %c1 : index
  scf.if %producer {
    "tk.decrease_registers"() {count = 40 : i64} : () -> ()
  } else {
    "tk.increase_registers"() {count = 232 : i64} : () -> ()
    %w = "tk.warpid"() : () -> index
    %r = arith.remui %w, %c4 : index
    %x = "tk.load"(%a, %c0, %c0, %r, %c0) : (!gx, index, index, index, index) -> !x
    %acc = "tk.load"(%c, %c0, %c0, %r, %c0) : (!gxc, index, index, index, index) -> !acc2
    %d = "tk.warpgroup_mma_ab"(%x, %sb, %acc) : (!x, !xb, !acc2) -> !acc2
    %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!acc2) -> !acc2
    "tk.store"(%c, %e, %c0, %c0, %r, %c0) : (!gxc, !acc2, index, index, index, index) -> ()
  }
  return
}

!ta = !tk.st<bf16, 32 : i64, 64 : i64, "auto">
!tacc = !tk.rt<f32, 16 : i64, 64 : i64, "row">
!gt = !tk.gl<bf16, 1 : i64, 1 : i64, 32 : i64, 64 : i64>
!gtc = !tk.gl<f32, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
func.func @atb(%a: !gt, %c: !gtc) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %sa = "tk.alloc"() : () -> !ta
  "tk.group_load"(%sa, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!ta, !gt, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %z = "tk.zero"() : () -> !tacc
  %d = "tk.warpgroup_mma_atb"(%sa, %sa, %z) : (!ta, !ta, !tacc) -> !tacc
  %e = "tk.warpgroup_mma_wait"(%d) {pending = 0 : i64} : (!tacc) -> !tacc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gtc, !tacc, index, index, index, index) -> ()
  return
}

// d = -(x @ a) - (a^T @ a) + 0: the real part of a complex product's
// imaginary-times-imaginary term, A in registers and in shared memory.
!nx = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
func.func @negated(%a: !gt, %c: !gtc) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %sa = "tk.alloc"() : () -> !ta
  %sq = "tk.alloc"() : () -> !tk.st<bf16, 64 : i64, 64 : i64, "auto">
  "tk.group_load"(%sa, %a, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!ta, !gt, index, index, index, index) -> ()
  "tk.sync"() : () -> ()
  %z = "tk.zero"() : () -> !tacc
  %x = "tk.zero"() : () -> !nx
  %d = "tk.warpgroup_mma_ab"(%x, %sq, %z) {negate = true} : (!nx, !tk.st<bf16, 64 : i64, 64 : i64, "auto">, !tacc) -> !tacc
  %d2 = "tk.warpgroup_mma_atb"(%sa, %sa, %d) {negate = true} : (!ta, !ta, !tacc) -> !tacc
  %e = "tk.warpgroup_mma_wait"(%d2) {pending = 0 : i64} : (!tacc) -> !tacc
  %w = "tk.warpid"() : () -> index
  "tk.store"(%c, %e, %c0, %c0, %w, %c0) : (!gtc, !tacc, index, index, index, index) -> ()
  return
}
