"""The package's architecture: imports go one way between layers, documented paths resolve.

The layers, lowest first (docs/index.md draws them). A module may import its own layer and
those below it, at module level or inside a function (loaded on first use) alike; only
imports under ``TYPE_CHECKING`` are exempt. The engine's runner loads the kernels by name
(`rope_ref._engine.dispatch`), and the kernels may import the runner; the public calls and
the adapters that choose a road per array kind sit above the kernels. No module imports
itself back through others (no circles), and nothing below the public calls calls
``apply_rope`` or ``apply_rope_qk`` to get its own work done.
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
    ("rope_ref._engine",),  # the engine: checks, caches, tables, the runner, dispatch
    ("rope_ref.backends",),  # the kernels (and their torch custom operators)
    # the public calls and the adapters of the array kinds (a road per kind)
    ("rope_ref._engine.api", "rope_ref._engine.kinds", "rope_ref._engine.cpu_arrays"),
    ("rope_ref",),  # the package itself: the public API
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


def _imports(path: Path, module: str, *, in_functions: bool = True) -> list[str]:
    """rope_ref modules `module` imports, inside functions too unless `in_functions` is False.

    Imports under ``if TYPE_CHECKING:`` are left out (they never run).
    """
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if in_functions or isinstance(node, ast.ClassDef):
                    visit(node.body)
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


#: Every import between rope_ref's modules, inside functions too: module -> imported modules.
GRAPH = {module: sorted(set(_imports(path, module))) for module, path in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    upward = [target for target in GRAPH[module] if layer(target) > layer(module)]
    assert not upward, f"{module} (layer {layer(module)}) imports upward: {upward}"


def test_no_import_goes_up_and_none_goes_round():
    """Counted over the whole package, function-level imports included: 0 and 0."""
    upward = [(m, t) for m, targets in GRAPH.items() for t in targets if layer(t) > layer(m)]
    assert len(upward) == 0, upward
    assert _circles(GRAPH) == []
    assert sum(map(len, GRAPH.values())) > 300  # the scan itself finds the imports


def test_the_circle_finder_finds_circles():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": ["e"]}
    assert sorted(map(sorted, _circles(graph))) == [["a", "b", "c"], ["e"]]
    assert _circles({"a": ["b"], "b": []}) == []


def _circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` with more than one module, or a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, []):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, []):
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


#: The engine's modules that hand calls to the kernels; no kernel imports them.
ROADS = (
    "rope_ref._engine.api",
    "rope_ref._engine.kinds",
    "rope_ref._engine.cpu_arrays",
    "rope_ref._engine.jax_arrays",
    "rope_ref._engine.fast_path",
    "rope_ref._engine.position_ids",
)


def test_kernels_run_through_the_runner_never_the_roads_above_them():
    kernels = [m for m in MODULES if m.startswith("rope_ref.backends")]
    assert len(kernels) > 10
    found = [(m, t) for m in kernels for t in GRAPH[m] if t in ROADS]
    assert found == []


#: Who may call `apply_rope` / `apply_rope_qk`: the public calls themselves, and the users
#: of the public API (the theory, the oracle kit, the commands), which are above them.
PUBLIC_API_USERS = (
    "rope_ref._engine.api",
    "rope_ref.analysis",
    "rope_ref.attention",
    "rope_ref.testing",
    "rope_ref.cli",
)
#: The torch custom operators are named after the calls; calling an operator is no call of
#: the Python function.
_OPERATORS = "torch.ops.rope_ref"


def _calls_of_the_public_api(path: Path) -> list[str]:
    """Where a module names ``apply_rope`` or ``apply_rope_qk`` other than to import it."""
    names = {"apply_rope", "apply_rope_qk"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id in names:
            found.append(f"{path.name}:{node.lineno} {node.id}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in names
            and ast.unparse(node.value) != _OPERATORS
        ):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_nothing_below_the_public_api_calls_it():
    """Only the public calls and the users of the public API name apply_rope(_qk)."""
    inside = [
        m for m in MODULES if not any(m == u or m.startswith(u + ".") for u in PUBLIC_API_USERS)
    ]
    assert "rope_ref._engine.runner" in inside
    assert "rope_ref.backends.torch_ops.operators" in inside
    found = [call for m in inside for call in _calls_of_the_public_api(MODULES[m])]
    assert found == []


def test_the_scan_for_calls_of_the_public_api_finds_them(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import rope_ref as rr\n"
        "from rope_ref import apply_rope\n"  # an import alone is no call
        "def f(x, torch):\n"
        "    torch.ops.rope_ref.apply_rope(x)\n"  # the custom operator
        "    rr.apply_rope_qk(x, x)\n"
        "    return on_host(apply_rope, x)\n",
        encoding="utf-8",
    )
    assert _calls_of_the_public_api(module) == ["m.py:5 rr.apply_rope_qk", "m.py:6 apply_rope"]


def test_every_module_belongs_to_a_layer_and_the_core_stands_alone():
    for module in MODULES:
        layer(module)
    for module in (m for m in MODULES if m.startswith("rope_ref._core")):
        imported = GRAPH[module]
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
