"""Core rules where a planted mistake in rope_ref/_core hides."""

from __future__ import annotations

import inspect

import pytest

import rope_ref as rr


def test_xpos_default_scale_base_is_rotary_embedding_torch_own():
    """Catches: a changed default ``scale_base`` (rotary-embedding-torch's is 512)."""
    ret = pytest.importorskip("rotary_embedding_torch")
    default = inspect.signature(ret.RotaryEmbedding).parameters["xpos_scale_base"].default
    assert rr.XPos().scale_base == default == 512
