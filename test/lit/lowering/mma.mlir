// mma_ABt on rt<bf16,16,32> x rt<bf16,16,32>: 2 k blocks x 2 n8 halves = 4
// mma.sync m16n8k16; the second k block accumulates onto the first's D.
// mma_AB with a col-layout b and f16 operands (vector<2xf16> registers).
// RUN: tkc %s --emit=nvvm | FileCheck %s --check-prefix=NVVM
// RUN: tkc %s --emit=ptx | FileCheck %s --check-prefix=PTX

// NVVM-LABEL: llvm.func @abt
// NVVM-COUNT-4: nvvm.mma.sync A[{{.*}}]{{ +}}B[{{.*}}]{{ +}}C[{{.*}}]{{ +}}{{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>{{.*}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// NVVM-NOT: nvvm.mma.sync
// NVVM-LABEL: llvm.func @ab_f16
// NVVM-COUNT-8: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)

// PTX-LABEL: .entry abt(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-NEXT: {[[D0:%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+]]},
// PTX-NEXT: {[[A0:%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+]]},
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-NEXT: {[[D1:%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+]]},
// PTX-NEXT: {[[A0]]},
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-NEXT: {{.*}},
// PTX-NEXT: {[[A1:%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+]]},
// PTX-NEXT: {{.*}},
// PTX-NEXT: {[[D0]]};
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-NEXT: {{.*}},
// PTX-NEXT: {[[A1]]},
// PTX-NEXT: {{.*}},
// PTX-NEXT: {[[D1]]};
// PTX-LABEL: .entry ab_f16(
// PTX-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
func.func @abt(%a: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>,
               %b: !tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>,
               %c: !tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %y = "tk.load"(%b, %c0, %c0, %c0, %c0) : (!tk.gl<bf16, 1 : i64, 1 : i64, 16 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<bf16, 16 : i64, 32 : i64, "row">
  %z = "tk.zero"() : () -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  %d = "tk.mma_abt"(%x, %y, %z) : (!tk.rt<bf16, 16 : i64, 32 : i64, "row">, !tk.rt<bf16, 16 : i64, 32 : i64, "row">, !tk.rt<f32, 16 : i64, 16 : i64, "row">) -> !tk.rt<f32, 16 : i64, 16 : i64, "row">
  "tk.store"(%c, %d, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 16 : i64, 16 : i64>, !tk.rt<f32, 16 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}

func.func @ab_f16(%a: !tk.gl<f16, 1 : i64, 1 : i64, 32 : i64, 32 : i64>,
                  %c: !tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>) attributes {tk.kernel} {
  %c0 = arith.constant 0 : index
  %x = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f16, 1 : i64, 1 : i64, 32 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<f16, 32 : i64, 32 : i64, "row">
  %y = "tk.load"(%a, %c0, %c0, %c0, %c0) : (!tk.gl<f16, 1 : i64, 1 : i64, 32 : i64, 32 : i64>, index, index, index, index) -> !tk.rt<f16, 32 : i64, 16 : i64, "col">
  %z = "tk.zero"() : () -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  %d = "tk.mma_ab"(%x, %y, %z) : (!tk.rt<f16, 32 : i64, 32 : i64, "row">, !tk.rt<f16, 32 : i64, 16 : i64, "col">, !tk.rt<f32, 32 : i64, 16 : i64, "row">) -> !tk.rt<f32, 32 : i64, 16 : i64, "row">
  "tk.store"(%c, %d, %c0, %c0, %c0, %c0) : (!tk.gl<f32, 1 : i64, 1 : i64, 32 : i64, 16 : i64>, !tk.rt<f32, 32 : i64, 16 : i64, "row">, index, index, index, index) -> ()
  return
}
