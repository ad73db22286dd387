// More than 227 KiB of shared memory is an error at the alloc that overflows,
// listing the allocations.
// RUN: not tkc %s --emit=nvvm 2>&1 | FileCheck %s

// CHECK: big.py:4:1: error: shared memory overflow: the allocations need 262144 bytes, more than the 232448 bytes (227 KiB)
// CHECK-NEXT: !tk.st<bf16, 128 : i64, 256 : i64, "128b"> at offset 0, 65536 bytes (big.py:1:1)
// CHECK: at offset 196608, 65536 bytes (big.py:4:1)
func.func @big() attributes {tk.kernel} {
  %0 = "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b"> loc("big.py":1:1)
  %1 = "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b"> loc("big.py":2:1)
  %2 = "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b"> loc("big.py":3:1)
  %3 = "tk.alloc"() : () -> !tk.st<bf16, 128 : i64, 256 : i64, "128b"> loc("big.py":4:1)
  return
}
