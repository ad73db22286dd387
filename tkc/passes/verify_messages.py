"""How tk-verify's messages name what they found (`short`, `describe`), and its
commonest rule (`need`: a value of one of some kinds). Shared by the
verifier modules of each op family.
"""
from __future__ import annotations


def short(t) -> str:
    """A tk type without the noise: rt<bf16, 16, 64, row>."""
    return str(t).removeprefix("!tk.").replace(" : i64", "").replace('"', "")


def need(name: str, what: str, v, kinds, desc: str):
    """Error unless v is one of `kinds` (view classes)."""
    if not isinstance(v, kinds):
        yield f"{name}: {what} must be {desc}, got {describe(v)}"


def describe(v) -> str:
    return "a non-tk value" if v is None else short(v.text())


def op_name(op) -> str:
    return op.name.removeprefix("tk.")
