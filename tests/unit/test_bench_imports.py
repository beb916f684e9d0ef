"""The bench modules import each other's helpers; they need the bench extras (psutil,
milvus-lite) that the test environment does not install, so a helper renamed in one module
would only show when someone ran the other. Read with ``ast`` instead of importing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def top_level_names(module: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def bench_imports(module: Path) -> list[tuple[str, str]]:
    """(module, name) for every ``from benchmarks.X import name`` in ``module``."""
    found = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
            found += [(node.module.split(".", 1)[1], a.name) for a in node.names]
    return found


@pytest.mark.parametrize("module", sorted(BENCH.glob("*.py")), ids=lambda p: p.stem)
def test_every_bench_import_names_something_defined(module: Path) -> None:
    missing = [
        f"benchmarks.{source}.{name}"
        for source, name in bench_imports(module)
        if name not in top_level_names(BENCH / f"{source}.py")
    ]
    assert not missing, f"{module.name} imports names that do not exist: {missing}"
