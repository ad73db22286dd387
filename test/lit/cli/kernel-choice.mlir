// A Python file with several kernels needs --kernel; names are checked.
// RUN: not tkc %S/Inputs/two_kernels.py 2>&1 | FileCheck %s --check-prefix=SEVERAL
// RUN: not tkc %S/Inputs/two_kernels.py --kernel nope 2>&1 | FileCheck %s --check-prefix=NOPE
// RUN: tkc %S/Inputs/two_kernels.py --kernel zero_fill | FileCheck %s --check-prefix=ZERO
// RUN: tkc %S/Inputs/two_kernels.py --kernel softmax_rows | FileCheck %s --check-prefix=SOFTMAX

// SEVERAL: error: {{.*}}two_kernels.py: defines several kernels (softmax_rows, zero_fill); pick one with --kernel
// NOPE: error: {{.*}}two_kernels.py: no kernel named 'nope' (it defines: softmax_rows, zero_fill)
// ZERO: func.func @zero_fill
// ZERO-NOT: softmax_rows
// SOFTMAX: func.func @softmax_rows
// SOFTMAX: "tk.row_max"
// SOFTMAX: "tk.sub_row"
