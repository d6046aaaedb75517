"""Second-probe cases for `RopeSpec` and its fields, `XPos`, the scaling rules and `yarn_mscale`."""

from __future__ import annotations

import re

import numpy as np
import torch
from _expect import S8, case, either, err, holds, inv64, is_, val, xn

import rope_ref as rr
import rope_ref.scaling as sc

# RopeSpec and its fields
for kw, value, expect in [
    ("head_dim", True, err("head_dim", "True")),
    ("head_dim", 8.0, err("head_dim", "8.0")),
    ("head_dim", "8", err("head_dim", "'8'")),
    (
        "head_dim",
        np.int8(8),
        val(holds(lambda s: s.head_dim == 8 and type(s.head_dim) is int, "head_dim int 8")),
    ),
    (
        "head_dim",
        torch.tensor(8),
        either("head_dim", holds(lambda s: type(s.head_dim) is int, "int")),
    ),
    ("head_dim", -8, err("head_dim", "-8")),
    ("head_dim", 0, err("head_dim", "0")),
    ("head_dim", 65538, err("head_dim", "65538")),
    ("head_dim", 2**100, err("head_dim")),
    ("rotary_dim", 0, err("rotary_dim", "0")),
    ("rotary_dim", 10, err("rotary_dim", "10")),
    ("rotary_dim", 4.0, err("rotary_dim", "4.0")),
    (
        "rotary_dim",
        np.uint16(4),
        val(holds(lambda s: s.rotary_dim == 4 and type(s.rotary_dim) is int, "rotary_dim 4")),
    ),
    ("rotary_start", -2, err("rotary_start", "-2")),
    ("rotary_start", True, err("rotary_start", "True")),
    ("rotary_start", 8, err("rotary_start")),
    (
        "rotary_start",
        3,
        either("rotary_start", holds(lambda s: s.rotary_dim == 4, "odd start, 4 rotated")),
    ),
    ("base", float("nan"), err("base", "nan")),
    ("base", float("inf"), err("base", "inf")),
    ("base", 1, err("base", "1")),
    ("base", 0.5, err("base", "0.5")),
    ("base", "10000", err("base", "'10000'")),
    ("base", 1e4 + 0j, err("base")),
    ("base", True, err("base")),
    (
        "base",
        np.float32(500000),
        val(holds(lambda s: s.base == 500000.0 and type(s.base) is float, "base float")),
    ),
    ("base", 10**400, err("base")),
    (
        "base",
        1 + 2**-52,
        either("base", holds(lambda s: np.all(np.isfinite(rr.inv_freq(s))), "finite frequencies")),
    ),
    ("layout", "HALF", err("layout", "'HALF'")),
    ("layout", None, err("layout", "None")),
    ("layout", "neox", err("layout", "'neox'")),
    ("output_layout", "bogus", err("output_layout", "'bogus'")),
    ("output_layout", 1, err("output_layout")),
    ("freqs", [1.0, float("nan"), 0.1, 0.01], err("freqs")),
    ("freqs", [1.0, 0.5], err("freqs")),
    (
        "freqs",
        [1.0, -0.5, 0.1, 0.01],
        either("freqs", holds(lambda s: len(s.freqs) == 4, "negative frequency kept")),
    ),
    ("freqs", ["1", "2", "3", "4"], err("freqs")),
    (
        "freqs",
        np.array([1.0, 0.5, 0.1, 0.01]),
        val(
            holds(
                lambda s: hash(s) is not None and s.freqs == (1.0, 0.5, 0.1, 0.01),
                "hashable, freqs kept",
            )
        ),
    ),
    (
        "freqs",
        (f for f in (1.0, 0.5, 0.1, 0.01)),
        either("freqs", holds(lambda s: s.freqs == (1.0, 0.5, 0.1, 0.01), "freqs kept")),
    ),
    ("freqs", 1.0, err("freqs")),
    ("freqs", [1 + 0j] * 4, err("freqs")),
    ("freqs", [1e308 * 10, 1.0, 1.0, 1.0], err("freqs")),
    ("xpos", rr.XPos, err("xpos")),
    ("xpos", 512, err("xpos")),
    ("scaling", 2.0, err("scaling", "2.0")),
    ("scaling", "linear", err("scaling", "'linear'")),
    ("scaling", sc.Linear, err("scaling")),
    ("sections", (2, 1), err("sections")),
    ("sections", (2, 2, 0), err("sections", "0")),
    ("sections", (5, -1), err("sections", "-1")),
    ("sections", "211", err("sections")),
    ("sections", (2.0, 2.0), err("sections")),
    ("sections", (), err("sections")),
    ("sections", (True, 3), err("sections")),
    ("section_order", "bogus", err("section_order", "'bogus'")),
    ("section_order", None, err("section_order")),
]:
    kws = {"head_dim": 8} | ({"freqs": None} if kw != "freqs" else {}) | {kw: value}
    shown = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))  # a case's name is the same each run
    case("RopeSpec", f"{kw}={shown:.40}", lambda kws=kws: rr.RopeSpec(**kws), expect)
case(
    "RopeSpec",
    "freqs with base set",
    lambda: rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01], base=500.0),
    err("base"),
)
case(
    "RopeSpec",
    "freqs with scaling",  # the rule takes the given frequencies as its input (ggml's factors)
    lambda: rr.rope_angles(rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01], scaling=sc.Linear(2)), 3),
    val(
        holds(
            lambda a: np.array_equal(np.asarray(a), 3 * np.array([1.0, 0.5, 0.1, 0.01]) / 2),
            "angles 3 * freqs / 2",
        )
    ),
)
case(
    "RopeSpec",
    "section_order without sections",
    lambda: rr.RopeSpec(8, section_order="interleaved"),
    either("section_order", holds(lambda s: s.sections is None, "plain")),
)
case("RopeSpec", "head_dim positional 2**16 + 2", lambda: rr.RopeSpec(2**16 + 2), err("head_dim"))
case(
    "RopeSpec",
    "replace() to an odd rotary_dim",
    lambda: __import__("dataclasses").replace(S8, rotary_dim=3),
    err("rotary_dim", "3"),
)
case(
    "RopeSpec",
    "replace() to base NaN",
    lambda: __import__("dataclasses").replace(S8, base=float("nan")),
    err("base", "nan"),
)

# XPos, the scaling rules and yarn_mscale
for name, call, expect in [
    ("XPos(nan)", lambda: rr.XPos(float("nan")), err("scale_base", "nan")),
    ("XPos(0)", lambda: rr.XPos(0), err("scale_base", "0")),
    ("XPos(-512)", lambda: rr.XPos(-512), err("scale_base")),
    ("XPos('512')", lambda: rr.XPos("512"), err("scale_base")),
    ("XPos(True)", lambda: rr.XPos(True), err("scale_base")),
    ("XPos(inf)", lambda: rr.XPos(float("inf")), err("scale_base")),
    ("Linear(0)", lambda: sc.Linear(0), err("factor", "0")),
    ("Linear(nan)", lambda: sc.Linear(float("nan")), err("factor", "nan")),
    ("Linear('2')", lambda: sc.Linear("2"), err("factor", "'2'")),
    ("Linear(True)", lambda: sc.Linear(True), err("factor")),
    (
        "Linear(1e-320)",
        lambda: sc.Linear(1e-320),
        either(
            "factor",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    ("Linear(2+0j)", lambda: sc.Linear(2 + 0j), err("factor")),
    (
        "Linear(np.float32(2))",
        lambda: sc.Linear(np.float32(2)),
        val(
            holds(
                lambda r: np.allclose(
                    rr.inv_freq(rr.RopeSpec(8, scaling=r)), inv64(8) / 2, rtol=1e-15
                ),
                "inv_freq / 2",
            )
        ),
    ),
    ("NTKAware(inf)", lambda: sc.NTKAware(float("inf")), err("factor")),
    ("NTKAware(-2)", lambda: sc.NTKAware(-2), err("factor")),
    ("NTKAware([2])", lambda: sc.NTKAware([2]), err("factor")),
    ("DynamicNTK(2, 0)", lambda: sc.DynamicNTK(2.0, 0), err("max_position", "0")),
    (
        "DynamicNTK(2, 1.5): lengths are real",
        lambda: sc.DynamicNTK(2.0, 1.5),
        val(
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            )
        ),
    ),
    ("DynamicNTK(2, '4096')", lambda: sc.DynamicNTK(2.0, "4096"), err("max_position")),
    ("DynamicNTK(nan, 4)", lambda: sc.DynamicNTK(float("nan"), 4), err("factor")),
    (
        "DynamicNTK(2, 2**60)",
        lambda: sc.DynamicNTK(2.0, 2**60),
        either("max_position", holds(lambda r: True, "built")),
    ),
    (
        "YaRN beta_fast < beta_slow (as HF)",
        lambda: sc.YaRN(4.0, 4096, beta_fast=1.0, beta_slow=32.0),
        either(
            "beta",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    ("YaRN beta_fast nan", lambda: sc.YaRN(4.0, 4096, beta_fast=float("nan")), err("beta_fast")),
    (
        "YaRN beta_slow -1",
        lambda: sc.YaRN(4.0, 4096, beta_slow=-1.0),
        either("beta_slow", holds(lambda r: True, "built")),
    ),
    ("YaRN mscale nan", lambda: sc.YaRN(4.0, 4096, mscale=float("nan")), err("mscale")),
    (
        "YaRN attention_factor -1",
        lambda: sc.YaRN(4.0, 4096, attention_factor=-1.0),
        err("attention_factor"),
    ),
    (
        "YaRN attention_factor 'x'",
        lambda: sc.YaRN(4.0, 4096, attention_factor="x"),
        err("attention_factor"),
    ),
    ("YaRN truncate 'no'", lambda: sc.YaRN(4.0, 4096, truncate="no"), err("truncate", "'no'")),
    ("YaRN original_max_position 0", lambda: sc.YaRN(4.0, 0), err("original_max_position")),
    (
        "YaRN original_max_position 4096.5: lengths are real",
        lambda: sc.YaRN(4.0, 4096.5),
        val(
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            )
        ),
    ),
    (
        "YaRN factor 0.5",
        lambda: sc.YaRN(0.5, 4096),
        either("factor", holds(lambda r: True, "built")),
    ),
    (
        "YaRN mscale_all_dim inf",
        lambda: sc.YaRN(4.0, 4096, mscale_all_dim=float("inf")),
        err("mscale_all_dim"),
    ),
    (
        "Llama3 low == high",
        lambda: sc.Llama3(8.0, 8192, low_freq_factor=4.0, high_freq_factor=4.0),
        either(
            "freq_factor",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    (
        "Llama3 low > high",
        lambda: sc.Llama3(8.0, 8192, low_freq_factor=4.0, high_freq_factor=1.0),
        err("freq_factor"),
    ),
    ("Llama3 low 0", lambda: sc.Llama3(8.0, 8192, low_freq_factor=0.0), err("low_freq_factor")),
    ("Llama3 factor -8", lambda: sc.Llama3(-8.0, 8192), err("factor")),
    (
        "Llama3 original_max_position True",
        lambda: sc.Llama3(8.0, True),
        err("original_max_position"),
    ),
    (
        "Llama3 high nan",
        lambda: sc.Llama3(8.0, 8192, high_freq_factor=float("nan")),
        err("high_freq_factor"),
    ),
    (
        "LongRoPE lengths differ",
        lambda: rr.RopeSpec(8, scaling=sc.LongRoPE([1.0] * 4, [1.0] * 3, 4096)),
        err("long_factor"),
    ),
    (
        "LongRoPE NaN factor",
        lambda: sc.LongRoPE([1.0, float("nan")], [1.0, 1.0], 4096),
        err("short_factor"),
    ),
    ("LongRoPE zero factor", lambda: sc.LongRoPE([1.0, 1.0], [0.0, 1.0], 4096), err("long_factor")),
    ("LongRoPE strings", lambda: sc.LongRoPE(["1", "1"], [1.0, 1.0], 4096), err("short_factor")),
    ("LongRoPE a scalar", lambda: sc.LongRoPE(1.0, [1.0, 1.0], 4096), err("short_factor")),
    (
        "LongRoPE 2-D factors",
        lambda: sc.LongRoPE([[1.0, 1.0]], [[1.0, 1.0]], 4096),
        err("short_factor"),
    ),
    (
        "LongRoPE original_max_position 0",
        lambda: sc.LongRoPE([1.0], [1.0], 0),
        err("original_max_position"),
    ),
    (
        "LongRoPE factor nan",
        lambda: sc.LongRoPE([1.0], [1.0], 4096, factor=float("nan")),
        err("factor"),
    ),
    (
        "LongRoPE attention_factor 0",
        lambda: sc.LongRoPE([1.0], [1.0], 4096, attention_factor=0.0),
        err("attention_factor"),
    ),
    (
        "LongRoPE wrong length for spec",
        lambda: rr.apply_rope(
            xn((1, 2, 8)), rr.RopeSpec(8, scaling=sc.LongRoPE([1.0] * 3, [1.0] * 3, 4096))
        ),
        err("factor"),
    ),
    (
        "Proportional(0): nothing rotates",
        lambda: sc.Proportional(0.0),
        val(holds(lambda r: not rr.inv_freq(rr.RopeSpec(8, scaling=r)).any(), "zero frequencies")),
    ),
    ("Proportional(1.5)", lambda: sc.Proportional(1.5), err("partial_rotary_factor", "1.5")),
    ("Proportional(nan)", lambda: sc.Proportional(float("nan")), err("partial_rotary_factor")),
    ("Proportional(0.5, factor=0)", lambda: sc.Proportional(0.5, factor=0.0), err("factor")),
    ("AttentionScale(0)", lambda: sc.AttentionScale(0.0), err("factor", "0")),
    ("AttentionScale(-1)", lambda: sc.AttentionScale(-1.0), err("factor")),
    ("AttentionScale(inf)", lambda: sc.AttentionScale(float("inf")), err("factor")),
    ("AttentionScale('2')", lambda: sc.AttentionScale("2"), err("factor")),
    ("Chain()", sc.Chain, either("rules", holds(lambda r: True, "built"))),
    ("Chain(1)", lambda: sc.Chain(1), err("rules")),
    ("Chain(Linear(2), 'x')", lambda: sc.Chain(sc.Linear(2.0), "x"), err("rules")),
    ("Chain(Linear) (a class)", lambda: sc.Chain(sc.Linear), err("rules")),
    (
        "Chain of Linear(2), Linear(3)",
        lambda: sc.Chain(sc.Linear(2.0), sc.Linear(3.0)),
        val(
            holds(
                lambda r: np.allclose(
                    rr.inv_freq(rr.RopeSpec(8, scaling=r)), inv64(8) / 6, rtol=1e-15
                ),
                "inv_freq / 6",
            )
        ),
    ),
    ("yarn_mscale(0)", lambda: sc.yarn_mscale(0.0), err("factor")),
    ("yarn_mscale(-1)", lambda: sc.yarn_mscale(-1.0), err("factor")),
    ("yarn_mscale(nan)", lambda: sc.yarn_mscale(float("nan")), err("factor")),
    ("yarn_mscale('2')", lambda: sc.yarn_mscale("2"), err("factor")),
    ("yarn_mscale(4, mscale=nan)", lambda: sc.yarn_mscale(4.0, float("nan")), err("mscale")),
    ("yarn_mscale(4, 1)", lambda: sc.yarn_mscale(4.0, 1.0), val(is_(0.1 * np.log(4.0) + 1.0))),
    ("yarn_mscale(0.5)", lambda: sc.yarn_mscale(0.5), val(is_(1.0))),
]:
    case("scaling" if "XPos" not in name else "XPos", name, call, expect)
