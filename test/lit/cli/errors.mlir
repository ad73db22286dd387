// Every user error is one located line on stderr with exit status 1, never a
// traceback; TKC_DEBUG=1 shows the traceback.
// RUN: not tkc %S/Inputs/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not tkc %S/Inputs/bad_kernel.py 2>&1 | FileCheck %s --check-prefix=TRACE
// RUN: not tkc %S/Inputs/typo_kernel.py 2>&1 | FileCheck %s --check-prefix=PYERR
// RUN: not tkc %S/Inputs/parse_error.mlir 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not tkc %s --emit=tile 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not tkc 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not env TKC_DEBUG=1 tkc %S/Inputs/typo_kernel.py 2>&1 | FileCheck %s --check-prefix=DEBUG

// MISSING: error: {{.*}}does-not-exist.mlir: no such file
// MISSING-NOT: Traceback
// TRACE: {{.*}}bad_kernel.py:9:5: error: mma_AB: shapes do not agree on K (32 vs 16)
// TRACE-NOT: Traceback
// PYERR: {{.*}}typo_kernel.py:8:44: error: TypeError: '_Dims' object is not callable
// PYERR-NOT: Traceback
// PARSE: {{.*}}parse_error.mlir:3:8: error: exp: expects exactly 1 operands, but got 0
// PARSE-NOT: Traceback
// STAGE: error: the input is already at stage 'llvm'
// NOFILE: error: no input file
// DEBUG: Traceback
// DEBUG: TypeError

// An input at the llvm stage cannot go back to tile IR.
module attributes {gpu.container_module} {
  gpu.module @tkc [#nvvm.target<chip = "sm_90a">] {
    llvm.func @f() attributes {nvvm.kernel} {
      llvm.return
    }
  }
}
