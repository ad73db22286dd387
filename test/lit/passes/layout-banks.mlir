// tk-layout-selection warns on shared accesses with bank conflicts above
// 1-way, located at the access; tk-bank-report remarks every access's degree.
// RUN: tkc %s --pass-pipeline=tk-layout-selection 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN --implicit-check-not=warning
// RUN: tkc %s --pass-pipeline=tk-layout-selection,tk-bank-report 2>&1 >/dev/null | FileCheck %s --check-prefix=ALL
// The default pipeline warns too, and still succeeds.
// RUN: tkc %s 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN --implicit-check-not=warning

!none = !tk.st<bf16, 64 : i64, 64 : i64, "none">
!auto = !tk.st<bf16, 64 : i64, 64 : i64, "auto">
!s32 = !tk.st<bf16, 64 : i64, 64 : i64, "32b">
!f16w = !tk.st<f32, 16 : i64, 16 : i64, "none">
!g = !tk.gl<bf16, 1 : i64, 1 : i64, 64 : i64, 64 : i64>
!rt = !tk.rt<bf16, 16 : i64, 64 : i64, "row">
!rtc = !tk.rt<bf16, 16 : i64, 64 : i64, "col">
!f = !tk.rt<f32, 16 : i64, 16 : i64, "row">

// Unswizzled 128-byte rows: the 8 rows of one ldmatrix phase start at the
// same bank, 8-way; stmatrix likewise. The 128b swizzle (auto) puts each
// row's 16-byte chunk in another bank group: 1-way, no warning.
// 64x64 bf16 "none" read by 16-byte group copies: a phase of 8 threads reads
// one 128-byte row, 1-way. A 32b swizzle stores 32-byte column panels 2 KiB
// apart, so 8 consecutive chunks of one row fall in 4 panels on the same
// banks: 4-way (the reason the widest swizzle is chosen).
// f32 16x16 unswizzled, row-layout pairs: lanes g and g+2 of a half warp
// are 128 bytes apart: 2-way.
// WARN: k.py:10:3: warning: 8-way shared-memory bank conflicts: ldmatrix of st<bf16, 64, 64, "none">
// WARN: k.py:11:3: warning: 8-way shared-memory bank conflicts: ldmatrix.trans of st<bf16, 64, 64, "none">
// WARN: k.py:12:3: warning: 8-way shared-memory bank conflicts: stmatrix of st<bf16, 64, 64, "none">
// WARN: k.py:16:3: warning: 4-way shared-memory bank conflicts: group copy of st<bf16, 64, 64, "32b">
// WARN: k.py:17:3: warning: 2-way shared-memory bank conflicts: f32 pair of st<f32, 16, 16, "none">

// ALL: k.py:9:3: remark: 1-way shared-memory bank conflicts: group copy of st<bf16, 64, 64, "none">
// ALL: k.py:10:3: remark: 8-way shared-memory bank conflicts: ldmatrix of st<bf16, 64, 64, "none">
// ALL: k.py:11:3: remark: 8-way shared-memory bank conflicts: ldmatrix.trans of st<bf16, 64, 64, "none">
// ALL: k.py:12:3: remark: 8-way shared-memory bank conflicts: stmatrix of st<bf16, 64, 64, "none">
// ALL: k.py:13:3: remark: 1-way shared-memory bank conflicts: ldmatrix of st<bf16, 64, 64, "128b">
// ALL: k.py:14:3: remark: 1-way shared-memory bank conflicts: ldmatrix.trans of st<bf16, 64, 64, "128b">
// ALL: k.py:15:3: remark: 1-way shared-memory bank conflicts: stmatrix of st<bf16, 64, 64, "128b">
// ALL: k.py:16:3: remark: 4-way shared-memory bank conflicts: group copy of st<bf16, 64, 64, "32b">
// ALL: k.py:17:3: remark: 2-way shared-memory bank conflicts: f32 pair of st<f32, 16, 16, "none">
// (the tk.syncs keep the accesses race-free: tk-verify warns of races too)
func.func @banks(%g: !g) attributes {tk.kernel, tk.warps = 4 : i64} {
  %c0 = arith.constant 0 : index
  %n = "tk.alloc"() : () -> !none
  %a = "tk.alloc"() : () -> !auto
  %p = "tk.alloc"() : () -> !s32
  %q = "tk.alloc"() : () -> !f16w
  "tk.group_load"(%n, %g, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!none, !g, index, index, index, index) -> () loc("k.py":9:3)
  "tk.sync"() : () -> ()
  %x = "tk.load"(%n, %c0, %c0) : (!none, index, index) -> !rt loc("k.py":10:3)
  %y = "tk.load"(%n, %c0, %c0) : (!none, index, index) -> !rtc loc("k.py":11:3)
  "tk.sync"() : () -> ()
  "tk.store"(%n, %x, %c0, %c0) : (!none, !rt, index, index) -> () loc("k.py":12:3)
  %u = "tk.load"(%a, %c0, %c0) : (!auto, index, index) -> !rt loc("k.py":13:3)
  %v = "tk.load"(%a, %c0, %c0) : (!auto, index, index) -> !rtc loc("k.py":14:3)
  "tk.sync"() : () -> ()
  "tk.store"(%a, %u, %c0, %c0) : (!auto, !rt, index, index) -> () loc("k.py":15:3)
  "tk.group_load"(%p, %g, %c0, %c0, %c0, %c0) {warps = 4 : i64} : (!s32, !g, index, index, index, index) -> () loc("k.py":16:3)
  %w = "tk.load"(%q, %c0, %c0) : (!f16w, index, index) -> !f loc("k.py":17:3)
  return
}
