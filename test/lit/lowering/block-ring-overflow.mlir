// A ring counts all its slots: 4 x 64 KiB overflows the 227 KiB a block may
// use, and the message says that the 256 KiB are a ring of 4 slots.
// RUN: not tkc %s --emit=nvvm 2>&1 | FileCheck %s

// CHECK: ring.py:2:1: error: shared memory overflow: the allocations need 263168 bytes, more than the 232448 bytes (227 KiB)
// CHECK-NEXT: !tk.barrier at offset 0, 8 bytes (ring.py:1:1)
// CHECK-NEXT: ring of 4 x !tk.st<bf16, 128 : i64, 256 : i64, "128b"> (4 slots of 65536 bytes) at offset 1024, 262144 bytes (ring.py:2:1)
func.func @big() attributes {tk.kernel} {
  %b = "tk.alloc"() : () -> !tk.barrier loc("ring.py":1:1)
  %r = "tk.alloc"() {stages = 4 : i64} : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b"> loc("ring.py":2:1)
  return
}
