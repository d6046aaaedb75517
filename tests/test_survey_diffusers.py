"""diffusers in `rope-ref survey`: every 1-D layout and factor, Flux's and Wan's multi-axis rows
agree; a torchvision that does not import is hidden (planted here as a broken package)."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.cli.survey._shims import hide_if_broken
from tests._libraries import require, rows


def test_rows_agree():
    found = rows("diffusers")
    assert len(found) == 8
    for row in found.values():
        assert row.verdict == "conformant", row


def test_ntk_factor_multiplies_the_base():
    require("diffusers")
    from diffusers.models.embeddings import get_1d_rotary_pos_embed

    cos, _sin = get_1d_rotary_pos_embed(
        64, np.arange(5), use_real=True, ntk_factor=4.0, freqs_dtype=__import__("torch").float64
    )
    theta = (10000.0 * 4.0) ** -(np.arange(0, 64, 2) / 64)  # the docstring's base x alpha
    angles = np.arange(5)[:, None] * theta
    np.testing.assert_allclose(cos.double().numpy()[:, 0::2], np.cos(angles), atol=1e-7)
    spec = rr.RopeSpec(64, base=40000.0, layout="interleaved")
    np.testing.assert_allclose(rr.rope_angles(spec, np.arange(5)), angles, rtol=1e-14)


def test_a_package_that_fails_to_import_is_hidden(tmp_path, monkeypatch):
    package = tmp_path / "rope_ref_broken_vision"
    package.mkdir()
    (package / "__init__.py").write_text("raise OSError('undefined symbol: cuda_op')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        reason = hide_if_broken("rope_ref_broken_vision")
        assert reason is not None
        assert "undefined symbol" in reason
        assert importlib.util.find_spec("rope_ref_broken_vision") is None
        with pytest.raises(ImportError):
            __import__("rope_ref_broken_vision")
    finally:
        sys.modules.pop("rope_ref_broken_vision", None)


def test_a_package_that_imports_is_left_alone():
    assert hide_if_broken("json") is None
    assert importlib.util.find_spec("json") is not None
