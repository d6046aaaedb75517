"""Second-probe cases for `rope_ref.attention` and `rope_ref.analysis`, and returned values.

Attention is checked against a float64 softmax attention written here. A returned value is the
caller's: changing it must not change the next call's answer. Last, a few more calls of
`apply_rope`, `rope_cos_sin` and `convert_layout`.
"""

from __future__ import annotations

import numpy as np
import torch
from _expect import (
    _INPUTS,
    DS,
    S8,
    X,
    _unshared,
    along,
    as_np,
    case,
    close,
    either,
    err,
    holds,
    inp,
    inv64,
    is_,
    rope64,
    val,
    xn,
    xt,
)

import rope_ref as rr

apply = rr.apply_rope
cs = rr.rope_cos_sin
ra = rr.rope_angles
rm = rr.rotation_matrix

# rope_ref.attention and rope_ref.analysis


def softmax64(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """Softmax attention of RoPE'd q and k (positions arange), in float64."""
    qr, kr = (
        rope64(q, along(np.arange(q.shape[-2]), q.shape)),
        rope64(k, along(np.arange(k.shape[-2]), k.shape)),
    )
    s = qr @ np.swapaxes(kr, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


att = rr.attention
for name, call, expect in [
    (
        "softmax q int",
        lambda: att.softmax_attention(inp(np.zeros((3, 8), int)), xn((3, 8)), xn((3, 8))),
        err("q"),
    ),
    (
        "softmax k torch, q numpy",
        lambda: att.softmax_attention(xn((3, 8)), xt((3, 8), torch.float64), xn((3, 8))),
        err("k"),
    ),
    (
        "softmax v wrong length",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((4, 8))),
        err("v"),
    ),
    (
        "softmax v a list",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), [[0.0] * 8] * 3),
        err("v"),
    ),
    (
        "softmax causal 'yes'",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), causal="yes"),
        err("causal"),
    ),
    (
        "softmax positions NaN",
        lambda: att.softmax_attention(
            xn((3, 8)), xn((3, 8)), xn((3, 8)), positions=inp(np.array([0, np.nan, 1]))
        ),
        err("positions"),
    ),
    (
        "softmax spec wrong head_dim",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), rr.RopeSpec(16)),
        err("q"),
    ),
    (
        "softmax value, causal",
        lambda: att.softmax_attention(
            xn((3, 8)), inp(X((3, 8), 1)), inp(X((3, 8), 2)), causal=True
        ),
        val(lambda r, i: close(r, softmax64(i[0], i[1], i[2], True), _INPUTS[0][0])),
    ),
    (
        "softmax value, torch float32",
        lambda: att.softmax_attention(
            xt((2, 3, 8)),
            inp(torch.from_numpy(X((2, 3, 8), 1)).float()),
            inp(torch.from_numpy(X((2, 3, 8), 2)).float()),
        ),
        val(
            lambda r, i: np.testing.assert_allclose(
                as_np(r), softmax64(i[0], i[1], i[2]), atol=1e-5
            )
        ),
    ),
    (
        "softmax empty sequence",
        lambda: att.softmax_attention(xn((0, 8)), xn((0, 8)), xn((0, 8))),
        val(holds(lambda r: r.shape == (0, 8) and r.dtype == np.float64, "empty (0, 8)")),
    ),
    (
        "linear feature_map 'gelu'",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map="gelu"),
        err("feature_map", "'gelu'"),
    ),
    (
        "linear feature_map 3",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map=3),
        err("feature_map"),
    ),
    (
        "linear feature_map returning NaN",
        lambda: att.linear_attention(
            xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map=lambda a: a * np.nan
        ),
        either("feature_map", holds(lambda r: not np.all(np.isfinite(as_np(r))), "NaN shows")),
    ),
    (
        "linear causal None",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), causal=None),
        err("causal"),
    ),
    (
        "linear q complex",
        lambda: att.linear_attention(inp(np.zeros((3, 8), complex)), xn((3, 8)), xn((3, 8))),
        err("q"),
    ),
]:
    case("attention", name, call, expect)
an = rr.analysis
for name, call, expect in [
    ("base_lower_bound dim 0", lambda: an.base_lower_bound(0, 100), err("dim", "0")),
    ("base_lower_bound dim 3", lambda: an.base_lower_bound(3, 100), err("dim", "3")),
    ("base_lower_bound dim 2.0", lambda: an.base_lower_bound(2.0, 100), err("dim")),
    (
        "base_lower_bound context -1",
        lambda: an.base_lower_bound(8, -1),
        err("context_length", "-1"),
    ),
    ("base_lower_bound context 1.5", lambda: an.base_lower_bound(8, 1.5), err("context_length")),
    ("base_lower_bound context True", lambda: an.base_lower_bound(8, True), err("context_length")),
    (
        "base_lower_bound context past the limit",
        lambda: an.base_lower_bound(128, 2**23),
        err("context_length"),
    ),
    (
        "base_lower_bound progress 'x'",
        lambda: an.base_lower_bound(8, 100, progress="x"),
        err("progress"),
    ),
    ("decay_bound distances NaN", lambda: an.decay_bound(8, [1.0, float("nan")]), err("distances")),
    ("decay_bound distances strings", lambda: an.decay_bound(8, ["a"]), err("distances")),
    ("decay_bound base 1", lambda: an.decay_bound(8, [1.0], base=1.0), err("base")),
    (
        "decay_bound normalize 'no'",
        lambda: an.decay_bound(8, [1.0], normalize="no"),
        err("normalize"),
    ),
    ("decay_bound dim 65538", lambda: an.decay_bound(65538, [1.0]), err("dim")),
    ("discrimination dim -2", lambda: an.discrimination(-2, [1.0]), err("dim")),
    (
        "discrimination distances inf",
        lambda: an.discrimination(8, [float("inf")]),
        err("distances"),
    ),
    (
        "discrimination value at 0",
        lambda: an.discrimination(8, [0.0]),
        val(holds(lambda r: np.isfinite(r).all(), "finite")),
    ),
    ("full_turn_pairs context -1", lambda: an.full_turn_pairs(S8, -1), err("context_length")),
    ("full_turn_pairs spec str", lambda: an.full_turn_pairs("x", 10), err("spec")),
    (
        "full_turn_pairs value",
        lambda: an.full_turn_pairs(S8, 10),
        val(
            holds(
                lambda r: r.tolist() == [True, False, False, False],
                "2*pi/theta_j < 10 only for j = 0",
            )
        ),
    ),
    ("wavelengths seq_len nan", lambda: an.wavelengths(DS, seq_len=float("nan")), err("seq_len")),
    (
        "wavelengths value",
        lambda: an.wavelengths(S8),
        val(holds(lambda r: np.allclose(r, 2 * np.pi / inv64(8), rtol=1e-15), "2 pi / theta")),
    ),
    (
        "wavelengths freqs with a zero",
        lambda: an.wavelengths(rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.0])),
        val(holds(lambda r: r[3] == np.inf, "infinite wavelength of a zero frequency")),
    ),
]:
    case("analysis", name, call, expect)

# a returned value is the caller's: changing it must not change the next call's answer
for func, name, get, mutate in [
    ("inv_freq", "inv_freq", lambda: rr.inv_freq(S8), lambda a: a.__setitem__(0, 99)),
    (
        "inv_freq",
        "inv_freq, DynamicNTK at seq_len 64",
        lambda: rr.inv_freq(DS, 64),
        lambda a: a.__setitem__(0, 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin (cached tables)",
        lambda: cs(S8, np.arange(3))[0],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin full, interleaved",
        lambda: cs(rr.RopeSpec(8, layout="interleaved"), np.arange(3), full=True)[1],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin torch",
        lambda: cs(S8, torch.arange(3))[0],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_angles",
        "rope_angles",
        lambda: ra(S8, np.arange(3)),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    ("rotation_matrix", "rotation_matrix", lambda: rm(S8, 3), lambda a: a.__setitem__((0, 0), 99)),
    (
        "available_backends",
        "available_backends",
        rr.available_backends,
        lambda a: a.__setitem__("reference", "x"),
    ),
    (
        "feature_order",
        "feature_order",
        lambda: rr.feature_order(S8, "interleaved", "half"),
        lambda a: a.__setitem__(0, 99),
    ),
    ("pair_axes", "pair_axes", lambda: rr.pair_axes(S8), lambda a: a.__setitem__(0, 99)),
    (
        "mrope_positions",
        "mrope_positions",
        lambda: rr.mrope_positions([3, [1, 2, 2]]),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "patch_positions",
        "patch_positions",
        lambda: rr.patch_positions([2, 2]),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    ("analysis", "wavelengths", lambda: an.wavelengths(S8), lambda a: a.__setitem__(0, 99)),
    (
        "apply_rope",
        "apply_rope numba result",
        lambda: apply(np.ones((1, 3, 8)), backend="numba"),
        lambda a: a.__setitem__((0, 0, 0), 99),
    ),
    (
        "apply_rope",
        "apply_rope reference result",
        lambda: apply(np.ones((1, 3, 8))),
        lambda a: a.__setitem__((0, 0, 0), 99),
    ),
]:
    case(
        func,
        f"changing the result of {name}",
        lambda get=get, mutate=mutate: _unshared(get, mutate),
        val(is_(True)),
    )
case("apply_rope", "x a Python list", lambda: apply([[0.0] * 8] * 3), err("x", "list"))
case("apply_rope", "x a NumPy scalar", lambda: apply(np.float64(1.0)), err("x"))
case(
    "apply_rope",
    "xpos spec, reference, no role",
    lambda: apply(xn(), rr.RopeSpec(8, xpos=rr.XPos())),
    err("role"),
)
case(
    "rope_cos_sin",
    "xpos spec, no role",
    lambda: cs(rr.RopeSpec(8, xpos=rr.XPos()), [1, 2]),
    err("role"),
)
case(
    "convert_layout",
    "src == dst: a copy of x",
    lambda: rr.convert_layout(xn((2, 8)), S8, src="half", dst="half"),
    val(lambda r, i: close(r, i[0], _INPUTS[0][0])),
)
