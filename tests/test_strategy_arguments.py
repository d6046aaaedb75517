"""The Hypothesis strategies of rope_ref.testing refuse bad arguments by name and draw every
documented range (``scaling_rules(max_factor=1)`` included)."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr


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
