"""The house's shape: no import cycle in tkc (imports inside functions
included), no module over 500 lines, scripts/ only the entry points, the
top-level documents short. Read from the sources (ast), nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "tkc"
MAX_LINES = 500


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py under tkc/."""
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The tkc modules `name` imports, anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            # `from x import y`: the module x.y when y is one (a package's
            # __init__ importing its submodules is not a cycle), else x
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `from x import name`: the module x
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycles():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert graph["tkc"] and graph["tkc.kernels.gemm_hopper"]  # the reader finds imports
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_scripts_holds_only_the_entry_points():
    assert len(list((ROOT / "scripts").iterdir())) <= 4


def test_the_top_level_documents_are_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 300
