"""docs/dsl.md documents every public name of the DSL.

The names are what `import tkc` gives (`dir(tkc)` in a fresh interpreter, so
that submodules other tests import do not show up, plus the lazily imported
PyTorch ops), what `tkc.ops` gives (`dir(tkc.ops)`), and the `__all__` of the
`tkc.tma` and `tkc.warpgroup` namespaces. Each must have an entry in the doc:
an inline code span that starts with the (qualified) name, on a heading line
or on a line that begins with a code span (a list item, a table row, an
entry's first line). A mention inside an example or in running text does not
count. No MLIR, no torch: a fresh `import tkc` only.
"""
from __future__ import annotations

import bisect
import json
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "dsl.md"

# Submodules of tkc that are not API: tkc.dsl (what tkc/__init__.py
# re-exports) and the compiler's own modules and packages, which show up in
# dir(tkc) when `import tkc` or other code loads them. docs/dsl.md names each
# in its "Not covered here" line.
EXCLUDED = (
    "dsl", "frontend", "dialect", "passes", "hopper", "diagnostics", "dtypes",
    "runtime", "torchops", "kernels", "interpreter", "lowering", "compiler", "cli",
    "prebuild", "philox", "sass", "bench", "tune",
)

# namespace -> the prefixes an entry may write its names with
PREFIXES = {
    "tkc": ("tkc.",),
    "tkc.ops": ("", "tkc.ops.", "ops."),
    "tkc.tma": ("tma.", "tkc.tma."),
    "tkc.warpgroup": ("warpgroup.", "tkc.warpgroup."),
}

_NAMES = r"""
import json, types, tkc, tkc.ops
pub = lambda m: sorted(n for n in dir(m) if not n.startswith("_"))
print(json.dumps({
    "tkc": pub(tkc),
    "modules": sorted(n for n in pub(tkc) if isinstance(getattr(tkc, n), types.ModuleType)),
    "torch_ops": sorted(getattr(tkc, "_TORCH_OPS", ())),
    "tkc.ops": pub(tkc.ops),
    "tkc.tma": sorted(tkc.tma.__all__),
    "tkc.warpgroup": sorted(tkc.warpgroup.__all__),
}))
"""


def public_names() -> dict:
    """The public names, computed in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _NAMES], capture_output=True, text=True,
                         check=True, cwd=DOC.parents[1])
    return json.loads(out.stdout)


def entries(text: str) -> list[str]:
    """The contents of the code spans that name entries: those on a heading
    line, and those at the head of a line that starts with a code span (after
    a list or table marker) -- before its first ": " (the description) or,
    in a table row, in its first cell. Fenced code blocks are examples, not
    entries; spans in running text are mentions."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S | re.M)
    spans = list(re.finditer(r"`([^`]+)`", text))
    starts = [m.start() for m in spans]
    out, pos = [], 0
    for line in text.split("\n"):
        start = pos
        pos += len(line) + 1
        if not line.startswith("#") and not re.match(r"(?:[-*] |\| )?`", line):
            continue
        mine = spans[bisect.bisect_left(starts, start):bisect.bisect_left(starts, pos - 1)]
        if line.startswith("#"):
            out += [m.group(1).strip() for m in mine]
            continue
        masked = list(line)  # the line with its spans blanked, to find the head's end
        for m in mine:
            masked[m.start() - start:m.end() - start] = "x" * (m.end() - m.start())
        masked = "".join(masked)
        head = masked.find(" | ", 1) if line.startswith("|") else masked.find(": ")
        head = len(line) if head < 0 else head
        out += [m.group(1).strip() for m in mine if m.start() - start < head]
    return out


def missing(text: str, names: dict) -> list[str]:
    """Qualified names with no entry in text."""
    spans = entries(text)

    def covered(name: str, prefixes) -> bool:
        pat = re.compile(rf"^(?:{'|'.join(map(re.escape, prefixes))}){re.escape(name)}(?![\w])")
        return any(pat.match(s) for s in spans)

    wanted = [("tkc", n) for n in names["tkc"] if n not in EXCLUDED]
    wanted += [("tkc", n) for n in names["torch_ops"]]
    wanted += [(ns, n) for ns in ("tkc.ops", "tkc.tma", "tkc.warpgroup") for n in names[ns]]
    out = []
    for ns, n in wanted:
        prefixes = PREFIXES[ns]
        if ns == "tkc.tma" and n in names["tkc"]:  # tkc.barrier is tkc.tma.barrier
            prefixes = prefixes + PREFIXES["tkc"]
        if not covered(n, prefixes):
            out.append(f"{ns}.{n}")
    return sorted(set(out))


def test_every_public_name_has_an_entry():
    names = public_names()
    gone = missing(DOC.read_text(), names)
    assert not gone, (f"docs/dsl.md has no entry for {', '.join(gone)}: add one (signature, what "
                      "it does, an example, its errors), or, for a submodule that is not API, "
                      "add it to EXCLUDED here and to the doc's 'Not covered here' line")


def test_the_exclusions_are_submodules_and_named_in_the_doc():
    names = public_names()
    not_modules = [n for n in EXCLUDED if n in names["tkc"] and n not in names["modules"]]
    assert not not_modules, f"EXCLUDED hides public names that are not submodules: {not_modules}"
    text = DOC.read_text()
    line = next((ln for ln in text.splitlines() if ln.startswith("Not covered here")), "")
    unnamed = [n for n in EXCLUDED if f"`tkc.{n}`" not in line]
    assert not unnamed, f"docs/dsl.md's 'Not covered here' line does not name {unnamed}"


def test_a_name_without_an_entry_is_reported():
    """The check itself: a name mentioned only in running text and examples
    is missing; qualified with another namespace it does not count either."""
    names = public_names()
    text = DOC.read_text()
    assert "tkc.ops.roll" not in missing(text, names)
    assert missing(text.replace("`roll(", "`_roll("), names) == ["tkc.ops.roll"]
    assert missing(text.replace("`tma.prefetch(", "`prefetch("), names) == ["tkc.tma.prefetch"]
    assert missing(text.replace("`tkc.based(", "`tkc._based("), names) == ["tkc.based"]
