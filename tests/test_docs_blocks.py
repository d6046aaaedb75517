"""Every ```python block of the docs (docs/**/*.md) runs on its own, as a reader would paste it.

A block whose first line is ``# needs: mod1, mod2`` is skipped, with the reason, when one of
those modules is not installed; ``gpu`` stands for a CUDA device (CuPy and a GPU). Pages
added later are picked up as they appear.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.S | re.M)
NEEDS = re.compile(r"#\s*needs:\s*(.*)")


def _blocks() -> list[tuple[str, str]]:
    """(page:line, code) of every python block under docs/, in a stable order."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts:
            continue
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(DOCS)}:{line}", match.group(1)))
    return found


BLOCKS = _blocks()


def needs(code: str) -> list[str]:
    """The modules named on the block's ``# needs:`` first line (none without one)."""
    first = code.lstrip("\n").split("\n", 1)[0]
    match = NEEDS.fullmatch(first.strip())
    if match is None:
        return []
    return [name.strip() for name in match.group(1).split(",") if name.strip()]


def _gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # no driver, no device: no GPU
        return False


def missing(names: list[str]) -> list[str]:
    """Those of `names` not available here (``gpu``: no CUDA device)."""
    out = []
    for name in names:
        if name == "gpu":
            if not _gpu_available():
                out.append("a CUDA GPU")
        elif importlib.util.find_spec(name.split(".")[0]) is None:
            out.append(name)
    return out


#: What the README's light test set-up installs (and the standard library's modules).
BASE = {"numpy", "rope_ref", "pytest", "hypothesis", "mpmath", "numba", "matplotlib"}


def _imports(code: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names)


@pytest.mark.parametrize("code", [c for _, c in BLOCKS], ids=[where for where, _ in BLOCKS])
def test_a_block_that_imports_an_optional_module_says_so(code):
    """Else it would fail, not skip, where that module is not installed."""
    assert _imports(code) <= BASE | set(needs(code))


def test_the_docs_have_python_blocks():
    assert len(BLOCKS) >= 30


def test_needs_reads_only_the_first_line():
    assert needs("# needs: torch, gpu\nimport torch\n") == ["torch", "gpu"]
    assert needs("import numpy\n# needs: torch\n") == []
    assert missing(["no_such_module_xyz", "numpy"]) == ["no_such_module_xyz"]
    assert _imports("import torch\nimport os\nfrom jax import numpy") == {"torch", "jax"}


# keras converts tensors through NumPy's old __array__ protocol: not rope_ref's to fix.
@pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")
@pytest.mark.parametrize("code", [c for _, c in BLOCKS], ids=[where for where, _ in BLOCKS])
def test_python_block_runs_on_its_own(code, tmp_path, monkeypatch, capsys):
    if absent := missing(needs(code)):
        pytest.skip(f"needs {', '.join(absent)}")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<docs block>", "exec"), {"__name__": "docs_block"})
