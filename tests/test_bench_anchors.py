"""The C++ CPU kernels as `rope-ref bench` anchors: they rotate what rope_ref rotates, and
a missing one is skipped with its install line."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rope_ref.cli.bench import anchors, harness
from rope_ref.cli.bench.rows import Case, Unavailable
from tests._independent import rope_half

HAVE_ORT = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))
HAVE_GGML = importlib.util.find_spec("ggml") is not None


def textbook(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """float64 RoPE of `x` (batch, seq, heads, dim) at `positions` (seq,), base 10000."""
    dim = x.shape[-1]
    theta = 10000.0 ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    return rope_half(x.astype(np.float64), positions.astype(np.float64)[:, None], theta)


SHAPES = [((1, 8, 4, 64), np.arange(8)), ((1, 1, 32, 128), np.array([anchors.DECODE_AT]))]


@pytest.mark.skipif(not HAVE_ORT, reason=f"ONNX Runtime is not installed: {anchors.ORT_INSTALL}")
@pytest.mark.parametrize(("shape", "positions"), SHAPES)
def test_onnxruntime_row_rotates_as_rope_does(shape, positions):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    row = next(i for i in anchors.anchor_rows(Case(shape, "float32")) if i.name == anchors.ORT_ROW)
    run = row.prepare(x)
    run()
    got = run.result()  # type: ignore[attr-defined]
    want = textbook(x, positions)
    tolerance = 1e-6 * (1 + positions.max()) * np.abs(x).max() + 1e-6
    assert np.max(np.abs(got - want)) <= tolerance


@pytest.mark.skipif(not HAVE_GGML, reason=f"ggml is not installed: {anchors.GGML_INSTALL}")
@pytest.mark.parametrize(("shape", "positions"), SHAPES)
def test_ggml_row_rotates_as_rope_does(shape, positions):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    row = next(i for i in anchors.anchor_rows(Case(shape, "float32")) if i.name == anchors.GGML_ROW)
    run = row.prepare(x)
    run()
    got = np.asarray(run.result()).reshape(shape)  # type: ignore[attr-defined]
    tolerance = 1e-6 * (1 + positions.max()) * np.abs(x).max() + 1e-6  # float32 angles
    assert np.max(np.abs(got - textbook(x, positions))) <= tolerance


@pytest.mark.parametrize(
    ("name", "install"),
    [(anchors.ORT_ROW, anchors.ORT_INSTALL), (anchors.GGML_ROW, anchors.GGML_INSTALL)],
)
def test_a_missing_anchor_is_skipped_with_its_install_line(monkeypatch, name, install):
    monkeypatch.setattr(anchors, "_installed", lambda module: False)
    case = Case((1, 1, 2, 8), "float32")
    row = next(i for i in anchors.anchor_rows(case) if i.name == name)
    with pytest.raises(Unavailable, match=f"not installed: {install}"):
        row.prepare(np.zeros(case.shape, np.float32))
    monkeypatch.setattr(harness, "rows", lambda case: [row])
    (result,) = harness.run_case(case, rounds=1)
    assert result.median_s is None
    assert result.note == f"not installed: {install}"


def test_anchors_refuse_dtypes_their_cpu_kernels_do_not_take(monkeypatch):
    monkeypatch.setattr(anchors, "_installed", lambda module: True)
    case = Case((1, 1, 2, 8), "float64")
    for row in anchors.anchor_rows(case):
        with pytest.raises(Unavailable, match="float64"):
            row.prepare(np.zeros(case.shape))
