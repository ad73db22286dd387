"""Attention backward on Hopper and tkc.attention's choice of kernels, under
the one name they had before they were split (importers keep working):

    attention_bwd_kernel.py  the backward kernel: attention_bwd (dQ, dK, dV)
    attention_bwd_prep.py    its preprocessing: attention_prep, the statistics'
                             layout (stats_columns)
    attention_picks.py       which forwards and backwards tkc.attention launches
                             (attention_kernels, forward_kernel, backward_kernels,
                             backward_options, the measured tables: LONG_KEYS,
                             BWD_SCHEDULE, ...) and dQ's read-back (dq_result)

New code imports from those modules. Patching a table here (LONG_KEYS, ...)
changes nothing: patch it on the module that defines it.
"""
from __future__ import annotations

from .attention_bwd_kernel import BKV, BKV_WIDE, CONVERT_ROWS, SPILLS, WARPS, attention_bwd  # noqa: F401
from .attention_bwd_prep import ROWS_PREP, STATS_ALIGN, WARPS_PREP, attention_prep, stats_columns  # noqa: F401
from .attention_picks import (BWD_QUERIES, BWD_SCHEDULE, CAUSAL_LONG_KEYS, DKV_REGISTERS,  # noqa: F401
                              LONG_KEYS, PAIRED_CAUSAL_KEYS, PAIRED_KV, PERSISTENT, ZIGZAG_BASE,
                              ZIGZAG_CAUSAL_KEYS, ZIGZAG_EX2_FMA, ZIGZAG_LONG, AttentionKernels,
                              attention_kernels, backward_kernels, backward_options, dq_order,
                              dq_result, forward_kernel)
