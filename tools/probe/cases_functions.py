"""Second-probe cases for the other public functions.

`inv_freq`, `attention_factor`, `convert_layout`, `permute_weights`, `sinusoidal_embedding`,
`axial_freqs`, `mrope_positions`, `patch_positions`, `feature_order`, `pair_axes` and
`available_backends`.
"""

from __future__ import annotations

import numpy as np
import torch
from _expect import _INPUTS, DS, S8, as_np, case, close, either, err, holds, inp, val, xn, xt

import rope_ref as rr

# the other public functions
for name, call, expect in [
    ("inv_freq seq_len nan", lambda: rr.inv_freq(DS, float("nan")), err("seq_len")),
    ("inv_freq spec str", lambda: rr.inv_freq("llama"), err("spec")),
    ("inv_freq seq_len '8'", lambda: rr.inv_freq(DS, "8"), err("seq_len")),
    ("attention_factor seq_len -1", lambda: rr.attention_factor(DS, -1), err("seq_len")),
    ("attention_factor spec None", lambda: rr.attention_factor(None), err("spec")),
    (
        "convert_layout src 'bogus'",
        lambda: rr.convert_layout(xn((2, 8)), S8, src="bogus"),
        err("src", "'bogus'"),
    ),
    ("convert_layout dst None", lambda: rr.convert_layout(xn((2, 8)), S8, dst=None), err("dst")),
    ("convert_layout 7 features", lambda: rr.convert_layout(xn((2, 7))), err("x")),
    ("convert_layout 0-d", lambda: rr.convert_layout(inp(np.float64(1))), err("x")),
    ("convert_layout a list", lambda: rr.convert_layout([[1.0] * 8]), err("x")),
    (
        "convert_layout torch bfloat16 exact",
        lambda: rr.convert_layout(xt((2, 8), torch.bfloat16), S8),
        val(lambda r, i: close(r, i[0][:, [0, 2, 4, 6, 1, 3, 5, 7]], _INPUTS[0][0])),
    ),
    (
        "permute_weights n_heads 0",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=0),
        err("n_heads", "0"),
    ),
    (
        "permute_weights n_heads 3",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=3),
        err("n_heads", "3"),
    ),
    (
        "permute_weights n_heads 2.0",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=2.0),
        err("n_heads", "2.0"),
    ),
    (
        "permute_weights n_heads True",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=True),
        err("n_heads"),
    ),
    (
        "permute_weights w 1-D",
        lambda: rr.permute_weights(xn((16,)), n_heads=2),
        either("w", holds(lambda r: r.shape == (16,), "shape")),
    ),
    (
        "permute_weights w int",
        lambda: rr.permute_weights(inp(np.zeros((16, 4), int)), n_heads=2),
        either("w", holds(lambda r: r.dtype.kind == "i", "int kept")),
    ),
    ("permute_weights w a list", lambda: rr.permute_weights([[0.0] * 4] * 16, n_heads=2), err("w")),
    (
        "permute_weights spec mismatch",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=2, spec=rr.RopeSpec(16)),
        err("spec"),
    ),
    ("sinusoidal dim 0", lambda: rr.sinusoidal_embedding(np.arange(3), 0), err("dim", "0")),
    ("sinusoidal dim 3", lambda: rr.sinusoidal_embedding(np.arange(3), 3), err("dim", "3")),
    ("sinusoidal dim 4.0", lambda: rr.sinusoidal_embedding(np.arange(3), 4.0), err("dim", "4.0")),
    ("sinusoidal dim True", lambda: rr.sinusoidal_embedding(np.arange(3), True), err("dim")),
    (
        "sinusoidal base nan",
        lambda: rr.sinusoidal_embedding(np.arange(3), 4, base=float("nan")),
        err("base"),
    ),
    ("sinusoidal base 1", lambda: rr.sinusoidal_embedding(np.arange(3), 4, base=1.0), err("base")),
    (
        "sinusoidal positions NaN",
        lambda: rr.sinusoidal_embedding(inp(np.array([0.0, np.nan])), 4),
        err("positions"),
    ),
    ("sinusoidal positions strings", lambda: rr.sinusoidal_embedding(["a"], 4), err("positions")),
    (
        "sinusoidal torch int8 positions",
        lambda: rr.sinusoidal_embedding(inp(torch.tensor([127], dtype=torch.int8)), 4),
        val(
            holds(
                lambda r: (
                    np.allclose(as_np(r)[0], [np.sin(127), np.sin(1.27), np.cos(127), np.cos(1.27)])
                    or np.allclose(
                        as_np(r)[0], [np.sin(127), np.cos(127), np.sin(1.27), np.cos(1.27)]
                    )
                ),
                "sinusoid at 127",
            )
        ),
    ),
    (
        "sinusoidal dim past limit",
        lambda: rr.sinusoidal_embedding(inp(np.broadcast_to(np.int64(1), (2**20,))), 2**10),
        err("positions"),
    ),
    ("axial_freqs []", lambda: rr.axial_freqs([]), err("sections")),
    ("axial_freqs [0]", lambda: rr.axial_freqs([0]), err("sections", "0")),
    ("axial_freqs [-2]", lambda: rr.axial_freqs([-2]), err("sections", "-2")),
    ("axial_freqs ['a']", lambda: rr.axial_freqs(["a"]), err("sections")),
    ("axial_freqs 4 (not a sequence)", lambda: rr.axial_freqs(4), err("sections")),
    (
        "axial_freqs kind 'bogus'",
        lambda: rr.axial_freqs([2, 2], kind="bogus"),
        err("kind", "'bogus'"),
    ),
    (
        "axial_freqs max_freq nan",
        lambda: rr.axial_freqs([2, 2], kind="pixel", max_freq=float("nan")),
        err("max_freq"),
    ),
    ("axial_freqs base 0.5", lambda: rr.axial_freqs([2, 2], base=0.5), err("base")),
    ("axial_freqs [2.0, 2.0]", lambda: rr.axial_freqs([2.0, 2.0]), err("sections")),
    (
        "mrope_positions []",
        lambda: rr.mrope_positions([]),
        either("segments", holds(lambda r: r.shape[0] == 0, "empty")),
    ),
    ("mrope_positions [-1]", lambda: rr.mrope_positions([-1]), err("segments", "-1")),
    ("mrope_positions [1.5]", lambda: rr.mrope_positions([1.5]), err("segments")),
    ("mrope_positions [[1, 2]]", lambda: rr.mrope_positions([[1, 2]]), err("segments")),
    (
        "mrope_positions merge_size 0",
        lambda: rr.mrope_positions([[1, 4, 4]], merge_size=0),
        err("merge_size", "0"),
    ),
    (
        "mrope_positions merge_size 3 not dividing",
        lambda: rr.mrope_positions([[1, 4, 4]], merge_size=3),
        err("merge_size"),
    ),
    ("mrope_positions 'abc'", lambda: rr.mrope_positions("abc"), err("segments")),
    (
        "mrope_positions [3, [1, 2, 2]] value",
        lambda: rr.mrope_positions([3, [1, 2, 2]]),
        val(
            holds(
                lambda r: (
                    r.tolist()
                    == [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3], [3, 3, 4], [3, 4, 3], [3, 4, 4]]
                ),
                "text then grid",
            )
        ),
    ),
    (
        "patch_positions [0, 2]",
        lambda: rr.patch_positions([0, 2]),
        either("shape", holds(lambda r: r.shape[0] == 0, "empty")),
    ),
    ("patch_positions [-1, 2]", lambda: rr.patch_positions([-1, 2]), err("shape", "-1")),
    ("patch_positions kind 'bogus'", lambda: rr.patch_positions([2, 2], kind="bogus"), err("kind")),
    (
        "patch_positions merge_size 3",
        lambda: rr.patch_positions([4, 4], merge_size=3),
        err("merge_size"),
    ),
    ("patch_positions [2.5, 2]", lambda: rr.patch_positions([2.5, 2]), err("shape")),
    ("patch_positions 4", lambda: rr.patch_positions(4), err("shape")),
    ("feature_order src 'bogus'", lambda: rr.feature_order(S8, "bogus", "half"), err("src")),
    ("feature_order spec None", lambda: rr.feature_order(None, "half", "interleaved"), err("spec")),
    ("pair_axes spec str", lambda: rr.pair_axes("x"), err("spec")),
    (
        "available_backends unchanged",
        rr.available_backends,
        val(holds(lambda r: r.get("reference", 1) is None, "reference available")),
    ),
]:
    case(name.split(" ")[0], name, call, expect)
