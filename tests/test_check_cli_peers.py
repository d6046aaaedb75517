"""`rope-ref check` expresses real modules: torchtune (torch arrays, (batch, seq, heads, dim),
per-row input_pos), MLX (offset only), HF configs, the spec handed to the target, and the
strict angle mode."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from rope_ref.cli import main

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"
FAST = ["--examples", "15"]
LLAMA3 = {
    "head_dim": 64,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
}


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def _check(capsys, *argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchtune/torchao import-time notices
        status = main(["check", *argv, *FAST])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out


def _torchtune():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pytest.importorskip("torchtune.modules")


TORCHTUNE = ["--convention", "plain", "--array", "torch", "--axes", "bshd", "--positions", "rows"]


def test_torchtune_rotary_is_conformant_with_per_row_input_pos(capsys):
    _torchtune()
    argv = [*TORCHTUNE, "--base", "500000", "--layout", "auto"]
    status, out = _check(capsys, f"{TARGETS}:torchtune_rope", *argv)
    assert status == 0, out
    assert "calling: torch arrays, axes bshd, positions rows" in out
    assert "layout: interleaved, detected (--layout auto)" in out
    assert "OK: conformant on 15 examples with the adopted layout 'interleaved'" in out
    assert "angle precision: float32-grade" in out


def test_torchtune_llama3_scaled_rope_with_an_hf_config(capsys, tmp_path):
    _torchtune()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3))
    target = f"{TARGETS}:torchtune_llama3"
    status, out = _check(
        capsys, target, *TORCHTUNE, "--hf-config", str(config), "--layout", "interleaved"
    )
    assert status == 0, out
    assert "scaling Llama3(factor=8.0, original_max_position=8192" in out
    # Without the scaling rule the mistake is named, not blamed on angle precision.
    status, out = _check(capsys, target, *TORCHTUNE, "--base", "500000", "--layout", "interleaved")
    assert status == 1
    assert "diagnosis: scaling\n" in out
    assert "the result follows Llama3(factor=8.0, original_max_position=8192" in out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_mlx_fast_rope_through_the_offset_mode(capsys, dtype):
    pytest.importorskip("mlx.core")
    argv = ["--convention", "plain", "--array", "mlx", "--positions", "offset", "--dtype", dtype]
    status, out = _check(capsys, f"{TARGETS}:mlx_fast_rope", *argv, "--base", "500000")
    assert status == 0, out
    assert "calling: mlx arrays, axes bhsd, positions offset" in out


@pytest.mark.parametrize(
    "config",
    [
        LLAMA3,
        {
            "head_dim": 32,
            "hidden_size": 128,
            "num_attention_heads": 4,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "rope_theta": 10000.0,
                "original_max_position_embeddings": 4096,
            },
        },
        {
            "model_type": "qwen2_vl",
            "hidden_size": 128,
            "num_attention_heads": 4,
            "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
        },
    ],
)
@pytest.mark.parametrize("positions", ["shared", "rows"])
def test_any_hf_config_with_a_spec_driven_target(capsys, config, positions):
    argv = ["--convention", "plain", "--hf-config", json.dumps(config), "--positions", positions]
    status, out = _check(capsys, f"{TARGETS}:spec_driven", *argv)
    assert status == 0, out
    assert "layout: half, as the spec says" in out


def test_fields_are_handed_to_targets_that_take_them(capsys):
    status, out = _check(
        capsys, f"{TARGETS}:fields_driven", "--convention", "plain", "--base", "123456"
    )
    assert status == 0, out


def test_strict_angle_mode(capsys):
    argv = [f"{TARGETS}:float32_angles", "--convention", "plain", "--max-position", "1000000"]
    status, out = _check(capsys, *argv)
    assert status == 0, out
    assert "angle precision: float32-grade (max angle error" in out
    status, out = _check(capsys, *argv, "--angle-dtype", "float64")
    assert status == 1, out
    assert "angle precision float64 (strict)" in out
    assert "diagnosis: precision\n" in out
    assert "fit angles computed in float32" in out
