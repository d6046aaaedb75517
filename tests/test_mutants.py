"""Tests that kill mutants the rest of the suite let live (see docs/mutation.md).

Each test pins one behaviour that a small, realistic edit of the code changed without any
other test failing; the docstring of each names the edit it catches.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._core import validation
from rope_ref._engine import dispatch
from rope_ref.testing import diagnose


def test_layout_and_direction_together_are_reported_as_layout():
    """Catches: the third branch of the layout check labelled "direction"."""
    spec = rr.RopeSpec(16, layout="half")
    x = np.random.default_rng(3).uniform(-1.0, 1.0, (6, 16))
    p = np.arange(6) * 37 + 5
    other = dataclasses.replace(spec, layout="interleaved")
    wrong = rr.apply_rope(x, other, p, inverse=True)  # other pairs and the other way
    found = diagnose(wrong, x, spec, p)
    assert found is not None
    assert found.cause == "layout"
    assert "also rotates the other way" in found.message
    only_inverse = diagnose(rr.apply_rope(x, spec, p, inverse=True), x, spec, p)
    assert only_inverse is not None
    assert only_inverse.cause == "direction"


def test_rope_parameters_partial_rotary_factor_wins_over_the_top_level_one():
    """Catches: the top-level ``partial_rotary_factor`` read before ``rope_parameters``'."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    given = {
        "hidden_size": 256,
        "num_attention_heads": 4,
        "head_dim": 64,
        "partial_rotary_factor": 0.5,
        "rope_parameters": {
            "rope_type": "linear",
            "rope_theta": 1e4,
            "factor": 2.0,
            "partial_rotary_factor": 0.25,
        },
    }
    config = transformers.LlamaConfig(**given)  # HF reads both and chooses
    hf_inv_freq, _ = ROPE_INIT_FUNCTIONS["linear"](config, "cpu")
    spec = rr.RopeSpec.from_hf(given)
    assert spec.rotary_dim == 2 * hf_inv_freq.numel() == 16
    np.testing.assert_allclose(rr.inv_freq(spec), hf_inv_freq.double().numpy(), rtol=1e-6)


def test_llama3_defaults_are_hf_own():
    """Catches: the default ``high_freq_factor`` (or ``low_freq_factor``) of Llama 3 changed.

    HF requires both keys; the values its Llama-3-scaled configs fill in when none are
    given (Apertus, CWM) are the ones Meta's code hard-codes.
    """
    transformers = pytest.importorskip("transformers")
    for config in (transformers.ApertusConfig(), transformers.CwmConfig()):
        params = config.rope_parameters
        assert params["rope_type"] == "llama3"
        rule = rr.scaling.Llama3(params["factor"], params["original_max_position_embeddings"])
        assert rule.high_freq_factor == params["high_freq_factor"]
        assert rule.low_freq_factor == params["low_freq_factor"]
        omitted = {k: v for k, v in params.items() if not k.endswith("freq_factor")}
        from_hf = rr.RopeSpec.from_hf({"head_dim": 64, "rope_parameters": omitted}).scaling
        assert isinstance(from_hf, rr.scaling.Llama3)
        assert from_hf.high_freq_factor == params["high_freq_factor"]
        assert from_hf.low_freq_factor == params["low_freq_factor"]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32])
@pytest.mark.parametrize("offset", [2**53 + 1, -(2**53) - 1, 2**62 + 2**9 - 1])
def test_small_integer_positions_shift_exactly_by_a_huge_offset(dtype, offset):
    """Catches: the integer shift done as ``float(p) + float(offset)`` (two roundings).

    2**53 + 1 is a tie in float64: alone it rounds to 2**53, but 1 + (2**53 + 1) = 2**53 + 2
    is exact. The sum is formed with Python integers here and rounded once.
    """
    p = np.array([1, 3, 5], dtype=dtype)
    spec = rr.RopeSpec(2, freqs=(1.0,))  # angle = position
    x = np.array([[1.0, 0.0]] * 3)
    want_positions = np.array([float(int(v) + offset) for v in p])
    got = rr.apply_rope(x, spec, p, offset=offset)
    np.testing.assert_array_equal(got, rr.apply_rope(x, spec, want_positions))
    twice = np.array([float(v) + float(offset) for v in p])  # what the mutant computes
    assert not np.array_equal(rr.apply_rope(x, spec, twice), got)


def test_llama3_band_edges_are_divided_exactly():
    """Catches: ``context / low`` or ``context / high`` as floor division.

    With context 8192 and low_freq_factor 3 the edge is 2730.67 wavelengths, not 2730: a
    pair of wavelength 2730.5 is in the medium band. The rule is HF's (and Meta's),
    written here: long wavelengths divided by the factor, short ones kept, the band
    between blended linearly in context / wavelength.
    """
    context, low, high, factor = 8192, 3.0, 7.0, 8.0
    rule = rr.scaling.Llama3(factor, context, low_freq_factor=low, high_freq_factor=high)
    wavelengths = np.array([2730.5, 1170.1, 5000.0, 100.0, 9000.0])  # 8192 / 7 = 1170.29
    theta = 2 * np.pi / wavelengths
    smooth = (context / wavelengths - low) / (high - low)
    medium = (1 - smooth) * theta / factor + smooth * theta
    want = np.where(wavelengths > context / low, theta / factor, medium)
    want = np.where(wavelengths < context / high, theta, want)
    got = rule.inv_freq(theta, base=1e4, rotary_dim=10, seq_len=None)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got[0] != theta[0] / factor  # 2730.5: blended, not divided


def test_rotation_matrix_of_a_multi_axis_spec():
    """Catches: the number of values a multi-axis position must have."""
    spec = rr.RopeSpec(8, sections=(1, 1, 2))  # pairs 0, 1, 2-3 follow axes t, h, w
    position = (3.0, 5.0, 7.0)
    theta = rr.inv_freq(spec)
    angles = np.array(position)[[0, 1, 2, 2]] * theta
    R = rr.rotation_matrix(spec, position)
    for j, angle in enumerate(angles):  # half layout: pair (j, j + 4)
        block = R[np.ix_([j, j + 4], [j, j + 4])]
        c, s = np.cos(angle), np.sin(angle)
        np.testing.assert_allclose(block, [[c, -s], [s, c]], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="`position` must be a single position"):
        rr.rotation_matrix(spec, [position, position])


def test_rotation_matrix_takes_seq_len_and_role_by_name_only():
    """Catches: the keyword-only marker of `rotation_matrix` dropped."""
    with pytest.raises(TypeError):
        rr.rotation_matrix(rr.RopeSpec(4), 1.0, 8.0)  # type: ignore[call-arg]


# --- backend availability (rope_ref._engine.dispatch), without starting numba ----------


@pytest.mark.parametrize(
    ("setting", "value", "refused"),
    [
        ("NUMBA_NUM_THREADS", "1", False),
        ("NUMBA_NUM_THREADS", " 16 ", False),
        ("NUMBA_NUM_THREADS", "0", True),
        ("NUMBA_NUM_THREADS", "-3", True),
        ("NUMBA_NUM_THREADS", "two", True),
        ("NUMBA_THREADING_LAYER", "OMP", False),
        ("NUMBA_THREADING_LAYER", "workqueue", False),
        ("NUMBA_THREADING_LAYER", "bogus", True),
    ],
)
def test_numba_settings_are_read_from_the_environment(monkeypatch, setting, value, refused):
    """Catches: the thread-count bound moved, the layer names not checked."""
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.delenv("NUMBA_THREADING_LAYER", raising=False)
    monkeypatch.setenv(setting, value)
    monkeypatch.setattr(dispatch, "_START_FAILURES", {})
    reason = dispatch._numba_environment_reason()
    assert (reason is not None) == refused
    if reason is not None:
        assert setting in reason
        assert reason == dispatch.unusable_reason("numba")  # said before loading anything
        assert reason == rr.available_backends()["numba"]


@pytest.mark.parametrize(
    ("message", "said"),
    [("No threading layer could be loaded.\nHINT: install tbb", "loaded.)"), ("", "Error)")],
)
def test_a_threading_layer_that_cannot_start_is_said_in_one_line(monkeypatch, message, said):
    """Catches: a later line of numba's message (or none) reported."""
    numba = pytest.importorskip("numba")

    def fail() -> int:
        raise ValueError(message)

    monkeypatch.setattr(numba, "get_num_threads", fail)
    monkeypatch.setattr(dispatch, "_START_FAILURES", {})
    dispatch._start_numba_threads()
    reason = dispatch._START_FAILURES["numba"]
    assert reason.startswith("numba's threading layer cannot start")
    assert reason.endswith(said)
    assert "\n" not in reason


def test_a_kernel_module_outside_the_installation_is_missing(monkeypatch):
    """Catches: find_spec's ModuleNotFoundError (parent package absent) not caught."""
    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("no_such_package.kernel", None))
    reason = dispatch._missing_reason("ghost")
    assert reason == "the kernel module no_such_package.kernel is not part of this installation"
    assert dispatch.unusable_reason("ghost") == reason


@pytest.mark.parametrize("error", [RuntimeError, ImportError])
def test_auto_hears_why_a_backend_would_not_load(monkeypatch, error):
    """Catches: an exception type dropped from those that make a backend unusable."""

    def load(name: str) -> None:
        msg = f"{name} cannot run"
        raise error(msg)

    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("rope_ref._core.reference", None))
    monkeypatch.setattr(dispatch, "load_backend", load)
    assert dispatch.unusable_reason("ghost") == "ghost cannot run"


def test_a_missing_dependency_names_it_in_the_error(monkeypatch):
    """Catches: ModuleNotFoundError.name set to the kernel module, not the dependency."""
    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("rope_ref._core.reference", "no_such_dep"))
    monkeypatch.setitem(dispatch.INSTALL_HINTS, "ghost", "pip install no_such_dep")
    with pytest.raises(ModuleNotFoundError, match="backend='ghost' is not available") as caught:
        dispatch.load_backend("ghost")
    assert caught.value.name == "no_such_dep"


def test_real_checks_at_their_edges():
    """Catches: 0 refused as non-negative; a Python int past float range not caught."""
    assert validation.check_nonnegative("x", 0.0) == 0.0
    assert validation.check_nonnegative("x", 0) == 0.0
    with pytest.raises(ValueError, match=r"`x` must be non-negative; got -0\.5"):
        validation.check_nonnegative("x", -0.5)
    with pytest.raises(ValueError, match=r"`x` must be finite; got inf"):
        validation.check_real("x", 10**400)
    with pytest.raises(ValueError, match=r"`x` must be finite; got -inf"):
        validation.check_real("x", -(10**400))
