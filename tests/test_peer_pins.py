"""The `peers` extra's pins give an environment whose imports print nothing.

transformers imports torchao with its model code when torchao is at least its
``TORCHAO_MIN_VERSION``; torchao 0.14 to 0.17 then print load errors and deprecation
notices under PyTorch 2.13. The pinned torchao must stay below that version (read from the
installed transformers), and, installed as pinned, importing transformers' model code or
torchtune must print nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pinned(name: str) -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    pins = [r for r in extras["peers"] if r.split("==")[0].split(">")[0].strip() == name]
    assert len(pins) == 1, pins
    assert "==" in pins[0], f"{name} must be pinned to one version; got {pins[0]!r}"
    return pins[0].split("==")[1].split(";")[0].strip()


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("+", maxsplit=1)[0].split(".")[:3])


def test_pinned_torchao_is_below_what_transformers_imports():
    import_utils = pytest.importorskip("transformers.utils.import_utils")
    floor = import_utils.TORCHAO_MIN_VERSION
    assert _version(_pinned("torchao")) < _version(floor)


def _quiet(code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""


@pytest.mark.parametrize(
    "code",
    [
        "import transformers; transformers.LlamaConfig",
        "import transformers.models.llama.modeling_llama",
        "import torchtune.modules",
    ],
)
def test_peer_imports_print_nothing_with_the_pinned_torchao(code):
    pytest.importorskip("transformers")
    pytest.importorskip("torchtune")
    installed = metadata.version("torchao")
    if _version(installed) != _version(_pinned("torchao")):
        pytest.skip(f"torchao {installed} is installed, not the pinned {_pinned('torchao')}")
    _quiet(code)
