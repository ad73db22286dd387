"""Hopper facts: what the sm_90a hardware fixes, in one place, below the
passes, the lowering and the interpreter (all of which read them here).

fragments.py   which elements of a register tile each lane holds
registers.py   how many scalars a thread holds, the words scf carries
lanes.py       lane maps: a lane's offset and runs, ldmatrix rows, gl extents
shared.py      the shared-memory budget, the swizzled st layout, st views
tma.py         TMA boxes: which shared tiles TMA moves, and how
warpgroup.py   the warpgroup mma / wait / setmaxnreg rules
sync.py        named barriers: a tk.sync's id and warp count

Pure Python over the dialect's type views; MLIR is imported only inside the
few functions that build IR (an address as arith ops, a carried type).
"""
