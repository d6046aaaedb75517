"""The README's commands and Python blocks run as written (what is not installed: skipped)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from rope_ref.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```(python|bash)\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
PYTHON = [code for language, code in BLOCKS if language == "python"]
COMMANDS = [
    line.split("#")[0].strip()
    for language, code in BLOCKS
    if language == "bash"
    for line in code.splitlines()
    if line.startswith("rope-ref ")
]
#: What each command needs beyond rope_ref itself (those not installed: skipped).
NEEDS = {
    "check transformers": ("transformers", "torch"),
    "plot": ("matplotlib",),
    "bench --preset gpu-qk": ("cupy",),  # and a CUDA device: its cases say so
}


def _missing(modules: list[str]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None]


def _imports(code: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_the_readme_shows_the_four_uses_on_its_first_screen():
    first_screen = README.read_text(encoding="utf-8").split("## Set up")[0]
    for command in ("rope-ref verify", "rope-ref check", "rope-ref bench", "rope-ref bound"):
        assert f"\n{command}" in first_screen


@pytest.mark.parametrize("code", PYTHON, ids=[f"block{i}" for i in range(len(PYTHON))])
def test_python_block_runs_on_its_own(code, tmp_path, monkeypatch, capsys):
    missing = _missing(_imports(code))
    if "numba" in code and importlib.util.find_spec("numba") is None:
        missing.append("numba")
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})


#: Commands left to other tests, and why.
ELSEWHERE = {
    "bench --sweep": "minutes of timing; tests/test_bench.py runs a short sweep",
    "decode-interleaved": "minutes of timing; tests/test_bench.py runs it for 1 and 3 sequences",
    "survey": "tests/test_survey.py runs it",
}


@pytest.mark.parametrize("command", COMMANDS)
def test_command_runs_as_written(command, tmp_path, monkeypatch, capsys):
    if why := next((w for word, w in ELSEWHERE.items() if word in command), None):
        pytest.skip(why)
    needs = next((m for prefix, m in NEEDS.items() if command[9:].startswith(prefix)), ())
    if missing := _missing(list(needs)):
        pytest.skip(f"needs {', '.join(missing)}")
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr()
