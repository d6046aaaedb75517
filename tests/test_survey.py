"""`rope-ref survey`: one row per installed peer; missing packages skipped with a reason;
the one disagreement it reports (keras-hub's "dynamic") confirmed by an independent float64
computation."""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest

from rope_ref.cli import main
from rope_ref.cli.survey import table_lines
from rope_ref.cli.survey.peers import GROUPS
from rope_ref.cli.survey.run import Row, survey


def test_every_group_is_surveyed_or_skipped_with_a_reason():
    rows = survey(4096, only=("mlx", "flash-attn", "rotary-embedding-torch"))
    assert {r.package for r in rows} == {"mlx", "flash-attn", "rotary-embedding-torch"}
    for row in rows:
        group = next(g for g in GROUPS if g.package == row.package)
        if group.missing() is not None:
            assert row.verdict == "skipped"
            assert row.diagnosis is not None
            assert row.diagnosis == group.missing()
            assert "is not installed (" in row.diagnosis
        else:
            assert row.verdict == "conformant", row
            assert row.max_ratio is not None
            assert 0.0 < row.max_ratio <= 1.0
            assert row.precision in ("float64-grade", "float32-grade")


def test_transformers_and_torchtune_rows_are_conformant():
    pytest.importorskip("transformers")
    rows = survey(40000, only=("transformers", "torchtune"))
    assert rows
    names = " ".join(r.settings for r in rows)
    for rope_type in ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "M-RoPE"):
        assert rope_type in names
    for row in rows:
        assert row.verdict in ("conformant", "skipped"), row


def test_table_and_json(capsys):
    rows = [
        Row("p", "1.0", "peer A", "x=1", "conformant", 0.25, "float32-grade", 1e-3),
        Row(
            "q", "", "q", "not installed", "skipped", diagnosis="q is not installed (pip install q)"
        ),
    ]
    lines = table_lines(rows)
    assert lines[0].split() == ["peer", "settings", "verdict", "error/tol", "angles"]
    assert "peer A 1.0  x=1" in lines[2]
    assert "float32-grade (1.0e-03 rad)" in lines[2]
    assert lines[3].split() == ["q", "not", "installed", "skipped", "-", "-"]
    assert lines[-1] == "- q (not installed): q is not installed (pip install q)"
    assert main(["survey", "--only", "flash-attn", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"][0]["package"] == "flash-attn"


def test_bad_max_position_is_a_usage_error(capsys):
    assert main(["survey", "--max-position", "3"]) == 2
    assert "--max-position must be between 16 and 1048575" in capsys.readouterr().err
    assert main(["survey", "--max-position", str(2**20)]) == 2
    capsys.readouterr()


def test_cache_peers_are_surveyed_past_the_old_cap():
    # torchtune indexes a cos/sin cache: it is built for the positions asked for, so
    # positions past 2**17 are measured, not an index error
    pytest.importorskip("torchtune")
    from rope_ref.cli.survey.run import survey

    rows = survey(2**18 + 5, only=("torchtune",))
    assert rows
    assert all(r.verdict in ("conformant", "NOT conformant") for r in rows), rows


def _keras_hub_layers():
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "torch")
    pytest.importorskip("keras")
    return pytest.importorskip("keras_hub.layers")


def test_keras_hub_dynamic_is_not_ntk_aware_confirmed_in_float64():
    """keras-hub's rope_type="dynamic" divides every frequency by s^(d/(d-2)): a constant
    (linear) rescale, not NTK-aware's base * s^(d/(d-2)). Checked against both formulas
    written out here in float64, independently of rope_ref."""
    layers = _keras_hub_layers()
    import keras

    d, s, base = 64, 4.0, 10000.0
    p = np.array([0, 1, 5, 100, 2049, 30000], dtype=np.float64)
    x = np.random.default_rng(0).uniform(-1, 1, (1, len(p), 1, d))
    layer = layers.RotaryEmbedding(rope_type="dynamic", scaling_factor=s, sequence_axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # keras' own NumPy conversion
        y = layer(x.astype(np.float32), positions=p[None])
        got = np.asarray(keras.ops.convert_to_numpy(y))

    def rope_half(inv):
        angles = p[:, None] * inv
        cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    j = np.arange(d // 2, dtype=np.float64)
    ntk = rope_half((base * s ** (d / (d - 2))) ** (-2 * j / d))
    constant = rope_half(base ** (-2 * j / d) / s ** (d / (d - 2)))
    float32_budget = 4 * 2.0**-24 * (p.max() + 1) * 2  # float32 angles and rotation, |x| <= 1
    assert np.max(np.abs(got - constant)) <= float32_budget
    assert np.max(np.abs(got - ntk)) > 100 * float32_budget
    rows = survey(30000, only=("keras-hub",))
    dynamic = next(r for r in rows if "dynamic" in r.settings)
    assert dynamic.verdict == "NOT conformant"
    assert dynamic.diagnosis is not None
    prefix = "scaling: the result follows Linear(factor="
    assert dynamic.diagnosis.startswith(prefix)
    fitted = float(dynamic.diagnosis[len(prefix) :].split(")")[0])
    assert fitted == pytest.approx(s ** (d / (d - 2)), rel=1e-5)  # the fitted parameter


def test_the_command_prints_a_table(capsys):
    pytest.importorskip("rotary_embedding_torch")
    assert main(["survey", "--only", "rotary-embedding-torch", "--max-position", "5000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["peer", "settings"]
    rows = [line for line in out[2:] if line.startswith("rotary-embedding-torch")]
    assert len(rows) == 3
    assert all("conformant" in row and "float32-grade" in row for row in rows)


def test_notes_under_the_table_are_wrapped_to_the_width():
    diagnosis = " ".join(f"word{i}" for i in range(60))  # about 400 characters
    rows = [Row("q", "", "q", "not installed", "skipped", diagnosis=diagnosis)]
    lines = table_lines(rows, width=60)
    assert all(len(line) <= 60 for line in lines), lines
    notes = lines[lines.index("") + 1 :]
    assert notes[0].startswith("- q (not installed): word0")
    assert all(line.startswith("  word") for line in notes[1:])
    assert " ".join(line.strip() for line in notes) == f"- q (not installed): {diagnosis}"
    # off a terminal (no width) each note stays on one line, whole
    assert table_lines(rows)[-1] == f"- q (not installed): {diagnosis}"
