"""Attention backward on Hopper, under the one name its modules had before
they were split (importers keep working):

    attention_bwd_kernel.py  the backward kernel: attention_bwd (dQ, dK, dV),
                             and dQ's read-back (dq_result)
    attention_bwd_prep.py    its preprocessing: attention_prep, the statistics'
                             layout (stats_columns)
    attention_schedule.py    its schedule (BackwardSchedule) and the forward's,
                             and the spaces tkc.attention picks from

New code imports from those modules.
"""
from __future__ import annotations

from .attention_bwd_kernel import BKV, BKV_WIDE, SPILLS, WARPS, attention_bwd, dq_result  # noqa: F401
from .attention_bwd_prep import ROWS_PREP, STATS_ALIGN, WARPS_PREP, attention_prep, stats_columns  # noqa: F401
from .attention_schedule import BackwardSchedule  # noqa: F401
