"""The layering of services/, kept by a test that reads every import (TYPE_CHECKING ones too).

- services/common imports no role package: it is the vocabulary every role shares.
- A role package (proxy, querynode, ...) imports services/common and itself, not another role,
  except through the documented exceptions below. streaming/ (the Spark data node) is a role.
- The wiring modules (services/launcher.py, services/cli.py, services/testing.py, infra/)
  may import any role: they are where roles meet.
- No module takes part in an import cycle, so a core never needs the module that uses it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: where roles meet: they import roles, roles never import them
WIRING = {"services", "launcher", "cli", "testing", "infra"}
#: role -> roles it may import, and why
EXCEPTIONS = {
    # the coordinator process hosts rootcoord, datacoord, querycoord and the index
    # coordination (Milvus's mixcoord): its service module builds all of them
    "rootcoord": {"datacoord", "querycoord", "indexnode"},
    # the proxy runs bulk imports (services/proxy/imports.py): their rows are checked and
    # made columns by the Kafka ingest decoder, so files and records obey one set of rules
    "proxy": {"ingest"},
}


def module_name(path: Path) -> str:
    """The import name of a file of the repo: its folders under ``vectide`` (setup.cfg maps
    the repo's root to that package)."""
    parts = ["vectide", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> str | None:
    """The package a module belongs to: "common", a role, a wiring name, or None (outside)."""
    parts = module.split(".")
    if parts[0] != "vectide" or len(parts) == 1:
        return None
    parts.pop(0)
    if parts[0] == "streaming":
        return "streaming"
    if parts[0] != "services":
        return None
    if len(parts) == 1 or parts[1].startswith("__"):
        return "services"  # the package itself (its __version__)
    return parts[1]


def imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute import of ``path``: (module, line), including ``from x import y`` as
    ``x.y`` when y may be a module."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
            yield from ((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)


def sources() -> list[Path]:
    return sorted([*(ROOT / "services").rglob("*.py"), *(ROOT / "streaming").rglob("*.py")])


def known_modules() -> set[str]:
    return {module_name(path) for path in sources()}


def violations() -> list[str]:
    found = []
    for path in sources():
        here = layer(module_name(path))
        if here in WIRING:
            continue
        for target, line in imports(path):
            there = layer(target)
            if there is None or there == here or there == "services":
                continue  # outside, own package, the package itself
            if here == "common" or (there != "common" and there not in EXCEPTIONS.get(here, ())):
                found.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {target}")
    return found


def import_graph() -> dict[str, set[str]]:
    known = known_modules()
    graph: dict[str, set[str]] = {}
    for path in sources():
        name = module_name(path)
        graph[name] = {target for target, _ in imports(path) if target in known} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_roles_import_only_common_and_documented_exceptions() -> None:
    assert violations() == []


def test_no_import_cycles() -> None:
    # packages import their own __init__ implicitly; only module-to-module edges count
    graph = {m: {t for t in ts if not graph_is_package(t)} for m, ts in import_graph().items()}
    assert cycles(graph) == []


def graph_is_package(module: str) -> bool:
    return (ROOT / Path(*module.split(".")[1:]) / "__init__.py").exists()


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """The rule and the cycle search catch a planted violation (so they can fail)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import vectide.services.x.y\n"
    )
    imported = [t for t, _ in imports(bad)]
    assert imported == ["typing", "typing.TYPE_CHECKING", "vectide.services.x.y"]
    assert layer("vectide.services.common.kv.memory") == "common"
    assert layer("vectide.streaming.flush") == "streaming"
