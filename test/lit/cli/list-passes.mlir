// tkc --list-passes: every tk pass with its description, and a word on
// upstream passes.
// RUN: tkc --list-passes | FileCheck %s
// CHECK: tk passes:
// CHECK: tk-grid-ordering {{ *}}persistent grids and L2-aware block orders
// CHECK: tk-layout-selection {{ *}}choose each auto shared tile's swizzle
// CHECK: tk-lower-to-nvvm
// CHECK: tk-pipeline-staging {{ *}}turn tk.pipeline loops and tma.load/tma.store into a warp-specialised
// CHECK: tk-verify {{ *}}check the tile IR rules IRDL cannot express
// CHECK: Upstream MLIR passes {{.*}} are accepted by name in --pass-pipeline
