"""Regression tests for what the second probe (tools/probe/second_probe.py) found."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.cli import main

TARGET = "tests.check_targets:correct_half"


def test_an_xpos_class_is_refused_like_a_scaling_class() -> None:
    """`xpos=rr.XPos` (the class, not an instance) is a TypeError naming `xpos`."""
    with pytest.raises(TypeError, match=r"`xpos` must be an instance .*got the class XPos"):
        rr.RopeSpec(head_dim=8, xpos=rr.XPos)


@pytest.mark.parametrize(
    ("args", "error", "name", "got"),
    [
        ((float("nan"),), ValueError, "factor", "nan"),
        ((float("inf"),), ValueError, "factor", "inf"),
        ((0.0,), ValueError, "factor", "0.0"),
        ((-1.0,), ValueError, "factor", "-1.0"),
        (("2",), TypeError, "factor", "'2'"),
        ((4.0, float("nan")), ValueError, "mscale", "nan"),
        ((4.0, None), TypeError, "mscale", "None"),
    ],
)
def test_yarn_mscale_refuses_what_is_not_a_factor(
    args: tuple[object, ...], error: type[Exception], name: str, got: str
) -> None:
    """`yarn_mscale` names a non-finite, non-positive or non-real argument (no NaN returned)."""
    with pytest.raises(error, match=rf"`{name}`.*got {re.escape(got)}"):
        rr.scaling.yarn_mscale(*args)


def test_yarn_mscale_values() -> None:
    """``0.1 * m * ln(s) + 1`` above s = 1, and 1 at or below it."""
    assert rr.scaling.yarn_mscale(4.0, 2.0) == pytest.approx(0.2 * math.log(4.0) + 1.0, rel=1e-15)
    assert rr.scaling.yarn_mscale(0.5) == 1.0
    assert rr.scaling.yarn_mscale(1.0, 3.0) == 1.0


@pytest.mark.parametrize(("offset", "error"), [("x", TypeError), (float("nan"), ValueError)])
def test_rope_atol_names_a_bad_offset(offset: object, error: type[Exception]) -> None:
    """`rope_atol(offset="x")` names `offset` (it was NumPy's "could not convert string")."""
    from rope_ref.testing import rope_atol

    with pytest.raises(error, match="`offset`"):
        rope_atol(rr.RopeSpec(8), [1, 2], dtype="float32", offset=offset)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"shape": -1}, "shape"),
        ({"shape": (2, -1)}, "shape"),
        ({"shape": 2.5}, "shape"),
        ({"shape": 3, "max_value": 2**70}, "max_value"),
        ({"shape": 3, "min_value": 2**63}, "min_value"),
    ],
)
def test_the_positions_strategy_names_bad_shapes_and_bounds(
    kwargs: dict[str, object], name: str
) -> None:
    """`strategies.positions` refuses a negative shape or int64-overflowing bounds by name."""
    pytest.importorskip("hypothesis")
    from hypothesis.errors import InvalidArgument

    from rope_ref.testing.strategies import positions

    with pytest.raises(InvalidArgument, match=f"`{name}`"):
        positions(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"bases": [0.5]}, "bases"),
        ({"bases": [float("nan")]}, "bases"),
        ({"head_dims": [0]}, "head_dims"),
    ],
)
def test_the_rope_specs_strategy_names_bad_bases_and_head_dims(
    kwargs: dict[str, object], name: str
) -> None:
    """A bad value in `bases` or `head_dims` is refused when the strategy is built, by name."""
    pytest.importorskip("hypothesis")
    from hypothesis.errors import InvalidArgument

    from rope_ref.testing.strategies import rope_specs

    with pytest.raises(InvalidArgument, match=f"`{name}`"):
        rope_specs(**kwargs)


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8}


@pytest.mark.parametrize("strict", ["yes", 1, None])
def test_from_hf_strict_must_be_a_bool(strict: object) -> None:
    """`strict` is True or False; "yes" used to be read as True without a word."""
    with pytest.raises(TypeError, match="`strict` must be True or False"):
        rr.RopeSpec.from_hf(LLAMA, strict=strict)
    with pytest.raises(TypeError, match="`strict` must be True or False"):
        rr.RopeSpec.from_hf_layers(LLAMA | {"num_hidden_layers": 2}, strict=strict)


@pytest.mark.parametrize("position", [float("nan"), float("-inf")])
def test_a_non_finite_scalar_position_is_shown(position: float) -> None:
    """`rotation_matrix(spec, nan)` says ``got nan``, not "an array containing NaN"."""
    with pytest.raises(ValueError, match=rf"`position` must be finite; got {position!r}\."):
        rr.rotation_matrix(rr.RopeSpec(8), position)


def test_multi_axis_positions_that_read_two_ways_raise() -> None:
    """Positions of shape (3,) for 3 tokens and 3 axes: per token, or one (t, h, w)? Raises."""
    spec = rr.RopeSpec(head_dim=8, sections=(2, 1, 1))
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    with pytest.raises(ValueError, match=r"`positions` of shape \(3,\) can be read two ways"):
        rr.apply_rope(x, spec, np.arange(3))
    # Explicit: one (t, h, w) = (5, 5, 5) for every token is plain RoPE at position 5.
    y = rr.apply_rope(x, spec, np.array([[5, 5, 5]]))
    theta = 10000.0 ** (-np.arange(4) / 4.0)
    c, s = np.cos(5 * theta), np.sin(5 * theta)
    a, b = x[..., :4], x[..., 4:]
    want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-14)
    # Four tokens: the shape can only mean one (t, h, w) for all of them, as before.
    four = rr.apply_rope(np.ones((1, 4, 8)), spec, np.array([0, 0, 0]))
    np.testing.assert_array_equal(four, np.ones((1, 4, 8)))


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--base", "nan"], "--base must be finite; got nan."),
        (["--rotary-dim", "3"], "--rotary-dim must be even; got 3."),
        (["--rotary-start", "-1"], "--rotary-start must be at least 0; got -1."),
        (["--examples", "0"], "--examples must be between 1 and 1000000; got 0."),
    ],
)
def test_check_usage_errors_go_to_stderr_naming_the_option(
    capsys: pytest.CaptureFixture[str], options: list[str], line: str
) -> None:
    """A bad `rope-ref check` option: exit 2, one line on stderr naming it, stdout empty."""
    status = main(["check", TARGET, "--convention", "plain", *options])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err == f"rope-ref check: error: {line}\n"


def test_check_json_usage_error_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    """With --json the usage error is the JSON verdict on stdout, naming --base."""
    import json

    status = main(["check", TARGET, "--convention", "plain", "--json", "--base", "inf"])
    data = json.loads(capsys.readouterr().out)
    assert status == 2
    assert data["verdict"] == "usage_error"
    assert data["error"] == "--base must be finite; got inf."


def test_plot_refuses_an_empty_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out ''` is a usage error; it used to write decay.png into the current directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["plot", "decay", "--out", ""])
    assert stop.value.code == 2
    assert "--out must name a file or a directory; got ''" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text"])
def test_a_layer_count_past_the_limit_is_refused(model_type: str) -> None:
    """``num_hidden_layers`` above 2**20 is a ValueError, not a MemoryError or a hang."""
    config = LLAMA | {"model_type": model_type, "head_dim": 8, "num_hidden_layers": 2**40}
    for read in (rr.RopeSpec.from_hf, rr.RopeSpec.from_hf_layers):
        with pytest.raises(ValueError, match=r"`num_hidden_layers` must be at most 2\*\*20"):
            read(config)
    layers = rr.RopeSpec.from_hf_layers(config | {"num_hidden_layers": 3})
    assert [spec.head_dim if spec else None for spec in layers] == [8, 8, 8]


@pytest.mark.parametrize("max_factor", [1.0, 1.5])
def test_scaling_rules_draw_below_a_factor_of_two(max_factor: float) -> None:
    """`scaling_rules(max_factor=1)` is documented; it used to fail at draw time."""
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings

    from rope_ref.testing.strategies import scaling_rules

    @settings(max_examples=25, deadline=None, database=None)
    @given(scaling_rules(max_factor=max_factor))
    def draw(rule: object) -> None:
        rule = rule if hasattr(rule, "inv_freq") else rule(4)  # type: ignore[operator]
        factor = getattr(rule, "factor", 1.0)
        assert factor is None or 1.0 <= factor <= max_factor
        assert np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=rule))))

    draw()


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_attention_of_no_tokens_is_empty(causal: bool) -> None:
    """No queries and no keys: an empty result, as linear_attention gives (it was NumPy's
    "zero-size array to reduction operation maximum")."""
    q, v = np.ones((2, 0, 8)), np.ones((2, 0, 3))
    for attend in (rr.attention.softmax_attention, rr.attention.linear_attention):
        out = attend(q, q, v, causal=causal)
        assert out.shape == (2, 0, 3)
        assert out.dtype == np.float64
