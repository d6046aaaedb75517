"""assert_rope_close: passes conformant results in every namespace, fails with a message that
names the worst element and the likely cause, and honours explicit tolerances."""

from __future__ import annotations

import re

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, rope_atol
from tests._helpers import host


def test_oracle_output_passes_in_every_namespace(xp):
    spec = rr.RopeSpec(head_dim=16, rotary_dim=10, rotary_start=2, layout="interleaved")
    x = xp.asarray(np.random.default_rng(0).standard_normal((2, 3, 5, 16)), dtype=xp.float32)
    p = xp.asarray(np.array([[0, 1, 2, 3, 4], [9, 10, 11, 12, 4000]])[:, None, :])
    assert_rope_close(rr.apply_rope(x, spec, p), x, spec, p)
    assert_rope_close(
        rr.apply_rope(x, spec, offset=7, inverse=True), x, spec, offset=7, inverse=True
    )


def test_failure_message_names_the_worst_element():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 8)).astype(np.float32)
    y = rr.apply_rope(x, spec)
    y[1, 2, 3, 6] += 0.5  # feature 6 = pair 2 (features 2 and 6) at position 3
    with pytest.raises(AssertionError) as info:
        assert_rope_close(y, x, spec)
    message = str(info.value)
    assert "Mismatched elements: 1 / 192" in message
    assert "batch 1, head 2, seq 3, feature 6: pair 2 (features 2 and 6, layout 'half')" in message
    angle = 3 * 10000.0 ** (-4 / 8)
    assert f"position 3, angle {angle:.6g} rad" in message
    assert re.search(r"\|error\| 0\.5 = [0-9.e+]+ x the tolerance", message)
    assert "Tolerance: error model (float32)" in message
    assert "Likely cause: unknown" in message


def test_seq_axis_and_pass_through_features_in_the_message():
    spec = rr.RopeSpec(head_dim=6, rotary_dim=4)
    x = np.ones((2, 5, 3, 6))  # (batch, seq, heads, head_dim)
    y = rr.apply_rope(x, spec, seq_axis=-3)
    assert_rope_close(y, x, spec, seq_axis=-3)
    y[0, 4, 1, 5] = 2.0
    with pytest.raises(AssertionError, match=r"batch 0, seq 4, head 1, feature 5: a pass-through"):
        assert_rope_close(y, x, spec, seq_axis=-3)


def test_explicit_tolerances_replace_the_model():
    spec = rr.RopeSpec(head_dim=4)
    x = np.ones((3, 4))
    y = rr.apply_rope(x, spec) + 1e-3
    assert_rope_close(y, x, spec, atol=2e-3)
    assert_rope_close(y, x, spec, rtol=1.0, atol=1e-3)
    with pytest.raises(AssertionError, match="explicit tolerance"):
        assert_rope_close(y, x, spec, atol=5e-4)


def test_shape_and_input_errors():
    spec = rr.RopeSpec(head_dim=4)
    x = np.ones((3, 4))
    with pytest.raises(AssertionError, match=r"shape \(3, 2\); the input x has shape \(3, 4\)"):
        assert_rope_close(np.ones((3, 2)), x, spec)
    with pytest.raises(ValueError, match=r"`x` must have spec\.head_dim = 4"):
        assert_rope_close(np.ones((3, 5)), np.ones((3, 5)), spec)
    with pytest.raises(TypeError, match="`spec` must be a RopeSpec"):
        assert_rope_close(x, x, "llama")
    with pytest.raises(ValueError, match="`actual` must have one of the floating dtypes"):
        assert_rope_close(x.astype(np.int64), x, spec)


def test_nan_in_the_result_fails():
    spec = rr.RopeSpec(head_dim=4)
    x = np.ones((3, 4), dtype=np.float32)
    y = rr.apply_rope(x, spec)
    y[2, 0] = np.nan
    with pytest.raises(AssertionError, match="Likely cause: non-finite"):
        assert_rope_close(y, x, spec)


def test_hf_llama_rotary_module_float32_at_long_context():
    # HF computes float32 angles; at position 1e5 that is ~1e-2 rad off, which the model
    # allows for float32 while a fixed atol of 1e-5 would not.
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    config = llama.LlamaConfig(hidden_size=256, num_attention_heads=2, rope_theta=500000.0)
    rotary = llama.LlamaRotaryEmbedding(config)
    p = torch.tensor([[0, 1, 255, 257, 2049, 65535, 99999, 131071]])
    q = torch.randn(1, 2, p.shape[-1], 128, generator=torch.Generator().manual_seed(3))
    cos, sin = rotary(q, p)
    q_hf, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    spec = rr.RopeSpec(head_dim=128, base=500000.0)
    assert_rope_close(q_hf, q, spec, p[:, None, :])
    exact = host(rr.apply_rope(q.double(), spec, p[:, None, :]))
    assert np.max(np.abs(host(q_hf) - exact)) > 1e-5  # a fixed float32 atol would fail it
    assert np.max(np.abs(host(q_hf) - exact)) < rope_atol(spec, p, dtype="float32", magnitude=6.0)


def test_meta_complex_float32_passes():
    torch = pytest.importorskip("torch")
    from tests import check_targets as meta

    x = torch.randn(2, 6, 3, 32, generator=torch.Generator().manual_seed(4))
    table = meta.precompute_freqs_cis(32, 5000)
    p = torch.tensor([0, 1, 7, 256, 2048, 4999])
    xq, _ = meta.apply_rotary_emb(x, x, table[p])
    assert_rope_close(xq, x, rr.RopeSpec(head_dim=32, layout="interleaved"), p, seq_axis=-3)


def test_the_fixture_object_reports_and_diagnoses_with_seq_len_and_role():
    from rope_ref.testing import RopeOracle

    oracle = RopeOracle()
    spec = rr.RopeSpec(head_dim=8, xpos=rr.XPos(scale_base=64.0))
    x = np.random.default_rng(5).standard_normal((2, 6, 8))
    y = rr.apply_rope(x, spec, seq_len=32, role="key")
    report = oracle.report(y, x, spec, seq_len=32, role="key")
    assert report.ok
    assert report.precision == "float64-grade"
    assert oracle.assert_close(y, x, spec, seq_len=32, role="key").ok
    assert oracle.diagnose(y, x, spec, seq_len=32, role="key") is None
    shifted = rr.apply_rope(x, spec, offset=1, seq_len=32, role="key")
    found = oracle.diagnose(shifted, x, spec, seq_len=32, role="key")
    assert found is not None
    assert found.cause != "unknown"


def test_a_report_names_its_worst_element_and_model():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(6).standard_normal((3, 8)).astype(np.float32)
    y = rr.apply_rope(x, spec)
    y[2, 1] += 0.25
    report = rr.testing.rope_report(y, x, spec)
    assert not report.ok
    assert report.worst_index == (2, 1)
    assert report.max_error == pytest.approx(0.25, rel=1e-5)
    assert report.max_ratio > 1.0
    assert report.precision == "coarser than float32"
    assert "error model (float32)" in report.model
    assert "NOT conformant" in report.summary()
    assert "likely cause:" in str(report)


def test_the_report_module_does_not_import_the_assert_module():
    import ast
    from pathlib import Path

    import rope_ref.testing._report as report

    tree = ast.parse(Path(report.__file__).read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "rope_ref.testing._assert" not in imported  # _assert imports _report: no circle
