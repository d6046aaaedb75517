"""The package's architecture: imports go one way between layers, documented paths resolve.

The layers, lowest first (docs/index.md draws them). A module may import its own layer and
those below it at module level; imports inside functions (loaded on first use) and under
``TYPE_CHECKING`` are exempt, as are the kernels, which the engine loads by name.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (
    ("rope_ref._core",),  # specs, positions, float64 tables, the reference rotation
    ("rope_ref.scaling",),  # the scaling rules
    ("rope_ref._config",),  # specs from HF configurations
    ("rope_ref._engine",),  # the public calls: checks, caches, dispatch
    ("rope_ref",),  # the package itself: the public API
    ("rope_ref.backends",),  # the kernels
    ("rope_ref.analysis", "rope_ref.attention"),  # the theory
    ("rope_ref.testing",),  # the oracle kit
    ("rope_ref.cli", "rope_ref.__main__"),  # every command, the harness, the survey
)


def _module_files() -> dict[str, Path]:
    files = {}
    for base, package in (
        (ROOT / "rope_ref", "rope_ref"),
        (ROOT / "backends", "rope_ref.backends"),
    ):
        for path in base.rglob("*.py"):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


MODULES = _module_files()


def layer(module: str) -> int:
    """The index of `module`'s layer: its longest matching prefix."""
    best, index = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix == "rope_ref"  # the package's own __init__ only
            if (module == prefix or (not exact and module.startswith(prefix + "."))) and len(
                prefix
            ) > best:
                best, index = len(prefix), i
    assert index is not None, module
    return index


def _top_level_imports(path: Path, module: str) -> list[str]:
    """rope_ref modules imported when `module` is imported (not in functions or TYPE_CHECKING)."""
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.extend(a.name for a in node.names if a.name.startswith("rope_ref"))
            elif isinstance(node, ast.ImportFrom) and node.module:
                name = node.module
                if node.level:  # relative: resolve against the package
                    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    name = f"{package}.{name}"
                if name.startswith("rope_ref"):
                    # `from rope_ref._core import spec` imports the submodule rope_ref._core.spec
                    found.extend(
                        f"{name}.{a.name}" if f"{name}.{a.name}" in MODULES else name
                        for a in node.names
                    )

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    upward = [
        target
        for target in _top_level_imports(MODULES[module], module)
        if layer(target) > layer(module)
    ]
    assert not upward, f"{module} (layer {layer(module)}) imports upward: {upward}"


def test_every_module_belongs_to_a_layer_and_the_core_stands_alone():
    for module in MODULES:
        layer(module)
    for module in (m for m in MODULES if m.startswith("rope_ref._core")):
        imported = _top_level_imports(MODULES[module], module)
        assert all(t.startswith("rope_ref._core") for t in imported), (module, imported)


def _documented_paths() -> set[str]:
    """Every dotted rope_ref path the docs and the README name."""
    paths: set[str] = set()
    for doc in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        text = doc.read_text(encoding="utf-8")
        for role in re.findall(r"\{(?:func|class|meth|mod|attr|data)\}`([^`]*)`", text):
            target = role.split("<")[-1].rstrip(">").lstrip("~")
            paths.add(target)
        paths.update(re.findall(r"`(rope_ref(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", text))
        module = None
        for line in text.splitlines():
            if line.startswith(".. currentmodule::"):
                module = line.split("::")[1].strip()
            elif module and re.fullmatch(r"   [A-Za-z_][A-Za-z0-9_]*", line):
                paths.add(f"{module}.{line.strip()}")
    return {p for p in paths if p.startswith("rope_ref")}


def _resolve(path: str) -> object:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as err:
            if err.name is not None and err.name.split(".")[0] != "rope_ref":
                return None  # the module exists and needs an optional dependency not installed
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


def test_every_documented_import_path_resolves():
    paths = _documented_paths()
    assert len(paths) > 50  # the collection itself works
    unresolved = []
    for path in sorted(paths):
        try:
            _resolve(path)
        except (ImportError, AttributeError) as err:
            unresolved.append(f"{path}: {err}")
    assert not unresolved


def test_public_modules_and_entry_points_resolve():
    import rope_ref

    for name in ("scaling", "analysis", "attention", "testing"):
        module = importlib.import_module(f"rope_ref.{name}")
        for public in getattr(module, "__all__", []):
            assert hasattr(module, public), f"rope_ref.{name}.{public}"
        assert getattr(rope_ref, name) is module
    for public in importlib.import_module("rope_ref.testing.strategies").__all__:
        _resolve(f"rope_ref.testing.strategies.{public}")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for target in [*project["scripts"].values(), *project["entry-points"]["pytest11"].values()]:
        module, _, attribute = target.partition(":")
        _resolve(f"{module}.{attribute}" if attribute else module)
    done = subprocess.run(
        [sys.executable, "-m", "rope_ref.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "verify" in done.stdout
