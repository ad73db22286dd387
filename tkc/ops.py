"""The tile operations for kernel authors: `from tkc.ops import *`."""
from .frontend.ops import *  # noqa: F401,F403
from .frontend.ops import __all__  # noqa: F401
