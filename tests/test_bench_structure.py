"""The bench is a harness over rows: its modules import one way, none in a circle."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "rope_ref" / "cli" / "bench"
PACKAGE = "rope_ref.cli.bench"


def _module(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def imports_within(path: Path) -> set[str]:
    """The bench modules `path` imports anywhere: at the top, in functions, for types."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n.startswith(PACKAGE + ".") and n.count(".") == 3}
    return found - {_module(path)}


def graph() -> dict[str, set[str]]:
    return {_module(p): imports_within(p) for p in sorted(BENCH.glob("*.py"))}


def test_no_bench_module_imports_another_in_a_circle():
    order = list(TopologicalSorter(graph()).static_order())  # CycleError names the circle
    assert order.index(f"{PACKAGE}.rows") < order.index(f"{PACKAGE}.harness")


def test_the_rows_know_nothing_of_the_harness():
    edges = graph()
    for rows in ("cpu", "gpu"):
        assert f"{PACKAGE}.harness" not in edges[f"{PACKAGE}.{rows}"]
    assert edges[f"{PACKAGE}.rows"] == set()


def test_a_planted_circle_is_found(tmp_path):
    planted = tmp_path / "cpu.py"
    planted.write_text("def f():\n    from rope_ref.cli.bench.gpu import x\n")
    edges = {**graph(), f"{PACKAGE}.cpu": imports_within(planted)}
    with pytest.raises(CycleError):
        list(TopologicalSorter(edges).static_order())
