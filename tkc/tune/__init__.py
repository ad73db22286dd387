"""Autotuning: a kernel builder declares its space and key (`tkc.autotune`,
space.py; a kernel with launch arguments fixed, bound.py); tuning builds, checks and times the candidates (measure.py); the
picks are data, per GPU (tables.py, and the package's tables/); `tkc tune`
runs it from the command line (cli.py)."""
from .bound import Bound
from .configs import bucket, default_key
from .space import Autotuned, autotune

__all__ = ["Autotuned", "Bound", "autotune", "bucket", "default_key"]
