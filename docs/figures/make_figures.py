"""Generate the figures and tables of the documentation from rope_ref's own code.

Run by ``docs/conf.py`` at build time; on its own: ``python docs/figures/make_figures.py
[OUTDIR]`` (default ``docs/_static/figures``). Everything written here is gitignored.

Files written to `outdir`:

- ``layouts.png``: which features rotate together, read off `rope_ref.rotation_matrix`.
- ``layout_conversion.png``: the interleaved -> half permutation of `rope_ref.feature_order`.
- ``angle_error.png``: float32 and float64 angle errors against exact angles.
- ``precision_table.csv``: the same errors at a few positions (d=128, base=500000).
- ``worked_example.csv``: absolute sinusoidal PE beside RoPE on 4 tokens, d=4.

The other pages' figures come from the ``fig_*.py`` modules beside this file (one per
page), each with a ``make(outdir)`` that returns the paths it wrote.
"""

from __future__ import annotations

import csv
import decimal
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Arc, Rectangle

import rope_ref as rr

#: Grey used for features that pass through unrotated.
PASS_GREY = "#d9d9d9"
#: Settings shared by the precision table and figure.
PRECISION_D, PRECISION_BASE = 128, 500000.0
TABLE_POSITIONS = (1, 8191, 131071, 1048575)


def _pair_colors(n: int) -> list[tuple[float, float, float, float]]:
    cmap = plt.get_cmap("tab10")
    return [cmap(j % 10) for j in range(n)]


# --------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------


def rotating_pairs(spec: rr.RopeSpec) -> list[tuple[int, int, int]]:
    """``(a, b, j)``: features ``a < b`` rotate together with frequency index ``j``.

    Read off the code: the off-diagonal entries of ``rotation_matrix(spec, 1)`` say which
    features couple, and the coupling angle (the angle at position 1 is the inverse
    frequency) is matched against `rope_ref.inv_freq` to find ``j``.
    """
    matrix = rr.rotation_matrix(spec, 1.0)
    theta = rr.inv_freq(spec)
    pairs = []
    for a in range(spec.head_dim):
        partners = [b for b in range(a + 1, spec.head_dim) if matrix[b, a] != 0.0]
        for b in partners:
            angle = np.arctan2(matrix[b, a], matrix[a, a])
            pairs.append((a, b, int(np.argmin(np.abs(theta - angle)))))
    return pairs


def _draw_features(ax: plt.Axes, spec: rr.RopeSpec, x0: float, y: float, *,
                   arcs: bool) -> None:
    """Boxes for the features of one head, left end at `x0`, height `y`, coloured by pair."""
    colors = _pair_colors(spec.n_pairs)
    pair_of = {}
    for a, b, j in rotating_pairs(spec):
        pair_of[a] = pair_of[b] = j
        if arcs:
            width, height = b - a, 0.35 * (b - a) + 0.5
            ax.add_patch(Arc((x0 + (a + b) / 2, y + 0.45), width, 2 * height, theta1=0,
                             theta2=180, color=colors[j], lw=2.2))
            ax.text(x0 + (a + b) / 2, y + 0.5 + height, f"j={j}", ha="center",
                    va="bottom", fontsize=8, color=colors[j])
    for i in range(spec.head_dim):
        rotating = i in pair_of
        ax.add_patch(Rectangle((x0 + i - 0.45, y - 0.45), 0.9, 0.9,
                               facecolor=colors[pair_of[i]] if rotating else PASS_GREY,
                               edgecolor="black" if rotating else "#888888", lw=0.8,
                               ls="-" if rotating else "--", alpha=0.85 if rotating else 1.0))
        ax.text(x0 + i, y, str(i), ha="center", va="center", fontsize=10,
                color="black" if rotating else "#777777", fontweight="bold")
        if spec.rotary_start and rotating:
            ax.text(x0 + i, y - 0.72, f"+{i - spec.rotary_start}", ha="center", va="center",
                    fontsize=7, color="#555555")
        elif not rotating:
            ax.text(x0 + i, y - 0.72, "pass", ha="center", va="center", fontsize=7,
                    color="#777777")


def layouts_figure(path: Path) -> None:
    """Which feature indices rotate together, for each layout, full and partial rotary."""
    rows = [{"head_dim": 8}, {"head_dim": 10, "rotary_start": 2, "rotary_dim": 6}]
    columns = {"half": "pairs (j, j + n_pairs)", "interleaved": "pairs (2j, 2j + 1)"}
    width, height = 11.5, 4.4
    fig, ax = plt.subplots(figsize=(11.0, 5.6))
    for c, (layout, pairs) in enumerate(columns.items()):
        ax.text(c * width + 4.5, 2 * height - 0.6, f'layout="{layout}":  {pairs}',
                ha="center", va="bottom", fontsize=12, fontweight="bold")
        for r, kwargs in enumerate(rows):
            spec = rr.RopeSpec(**kwargs, layout=layout)
            y = (len(rows) - 1 - r) * height
            _draw_features(ax, spec, c * width, y, arcs=True)
            label = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            ax.text(c * width - 0.45, y + 2.9, f"RopeSpec({label})", ha="left",
                    va="bottom", fontsize=9, family="monospace", color="#333333")
    ax.text(-0.45, -1.45, "Colour = pair j (frequency index j, inv_freq = base^(-2j/rotary_dim)); "
            "grey = pass-through feature; +k = offset from rotary_start. "
            "Pairs read off rope_ref.rotation_matrix.", fontsize=8, color="#444444")
    ax.set_xlim(-0.7, width + 9.7)
    ax.set_ylim(-1.6, 2 * height + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout(pad=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def conversion_figure(path: Path) -> None:
    """The interleaved -> half feature permutation used by convert_layout/permute_weights."""
    spec = rr.RopeSpec(head_dim=8)
    order = rr.feature_order(spec, "interleaved", "half")  # half[h] = interleaved[order[h]]
    inter = rr.RopeSpec(head_dim=8, layout="interleaved")
    colors = _pair_colors(spec.n_pairs)
    pair_of = {a: j for a, b, j in rotating_pairs(inter) for a in (a, b)}
    fig, ax = plt.subplots(figsize=(8.0, 2.9))
    _draw_features(ax, inter, 0.0, 2.4, arcs=False)
    _draw_features(ax, spec, 0.0, 0.0, arcs=False)
    for h, i in enumerate(order):
        ax.annotate("", xy=(h, 0.5), xytext=(i, 1.9),
                    arrowprops={"arrowstyle": "->", "color": colors[pair_of[i]], "lw": 1.6})
    ax.text(-0.7, 2.4, 'layout="interleaved"', ha="right", va="center", family="monospace",
            fontsize=9)
    ax.text(-0.7, 0.0, 'layout="half"', ha="right", va="center", family="monospace",
            fontsize=9)
    ax.set_title(f"feature_order(RopeSpec(head_dim=8), 'interleaved', 'half') = {order}",
                 fontsize=9, family="monospace")
    ax.set_xlim(-4.2, 7.8)
    ax.set_ylim(-0.7, 3.0)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


# --------------------------------------------------------------------------------------
# Precision
# --------------------------------------------------------------------------------------


def _exact_inv_freq(d: int, base: float) -> list[decimal.Decimal]:
    """``base ** (-2j/d)`` to 60 significant digits (stdlib `decimal`)."""
    return [decimal.Decimal(base) ** (decimal.Decimal(-2 * j) / decimal.Decimal(d))
            for j in range(d // 2)]


def _max_error(angles: np.ndarray, positions: np.ndarray, exact_inv: list[decimal.Decimal],
               ) -> np.ndarray:
    """Max over pairs of ``|angles[p, j] - p * exact_inv[j]|``, computed in decimal."""
    out = np.empty(len(positions))
    for r, p in enumerate(positions):
        dp = decimal.Decimal(int(p))
        out[r] = max(float(abs(decimal.Decimal(float(a)) - dp * e))
                     for a, e in zip(angles[r], exact_inv, strict=True))
    return out


def float32_angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    """The common float32 recipe (HF/vLLM): float32 inv_freq, positions and product."""
    f32 = np.float32
    exponents = (np.arange(0, d, 2).astype(f32) / f32(d)).astype(f32)
    inv = (f32(1.0) / np.power(f32(base), exponents, dtype=f32)).astype(f32)
    return np.outer(np.asarray(positions, f32), inv).astype(f32)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even), returned as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.astype(np.uint32).view(np.float32)


def angle_errors(positions: np.ndarray) -> dict[str, np.ndarray]:
    """Measured errors of rope_ref's float64 angles and of float32 angles, per position."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        spec = rr.RopeSpec(head_dim=PRECISION_D, base=PRECISION_BASE)
        exact = _exact_inv_freq(PRECISION_D, PRECISION_BASE)
        a64 = np.asarray(rr.rope_angles(spec, positions))
        a32 = float32_angles(positions, PRECISION_D, PRECISION_BASE).astype(np.float64)
        err64 = _max_error(a64, positions, exact)
        err32 = _max_error(a32, positions, exact)
    cos_err32 = np.max(np.abs(np.cos(a32) - np.cos(a64)), axis=-1)
    return {"float64": err64, "float32": err32, "cos32": cos_err32}


def precision_table(path: Path) -> None:
    """CSV: angle errors at a few positions, with the error-model bounds beside them."""
    positions = np.array(TABLE_POSITIONS, dtype=np.int64)
    errors = angle_errors(positions)
    phi = positions * rr.inv_freq(rr.RopeSpec(head_dim=PRECISION_D,
                                              base=PRECISION_BASE))[0]
    as_bf16 = bf16_round(positions.astype(np.float32))
    with np.errstate(over="ignore"):
        as_fp16 = positions.astype(np.float32).astype(np.float16)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["position p", "largest angle (rad)", "float64 error (rope_ref)",
                         "bound |φ|·2⁻⁵²", "float32 error", "bound |φ|·2⁻²⁴",
                         "float32 max |Δcos|", "p in bfloat16", "p in float16"])
        for r, p in enumerate(positions):
            writer.writerow([
                f"{p:,}", f"{phi[r]:,.0f}", f"{errors['float64'][r]:.1e}",
                f"{phi[r] * 2.0**-52:.1e}", f"{errors['float32'][r]:.1e}",
                f"{phi[r] * 2.0**-24:.1e}", f"{errors['cos32'][r]:.1e}",
                f"{float(as_bf16[r]):,.0f}", "inf" if np.isinf(as_fp16[r]) else
                f"{float(as_fp16[r]):,.0f}",
            ])


def angle_error_figure(path: Path) -> None:
    """Log-log: max angle error over pairs against position, float64 and float32."""
    positions = np.unique(np.round(np.logspace(0, np.log10(2**20), 41)).astype(np.int64))
    errors = angle_errors(positions)
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    p = positions.astype(np.float64)
    ax.loglog(p, p * 2.0**-24, "--", color="tab:red", lw=1, label=r"$|\phi|\cdot 2^{-24}$")
    ax.loglog(p, errors["float32"], "o-", color="tab:red", ms=3,
              label="float32 angles (HF/vLLM recipe)")
    ax.loglog(p, p * 2.0**-52, "--", color="tab:blue", lw=1, label=r"$|\phi|\cdot 2^{-52}$")
    ax.loglog(p, np.maximum(errors["float64"], 1e-20), "o-", color="tab:blue", ms=3,
              label="float64 angles (rope_ref.rope_angles)")
    ax.axhline(2.0**-9, color="tab:gray", ls=":", lw=1.2,
               label=r"bf16 rounding of cos/sin near 1 ($2^{-9}$)")
    ax.set_xlabel("position p")
    ax.set_ylabel("max over pairs of |angle error| (rad)")
    ax.set_title(f"Angle error against exact angles, d={PRECISION_D}, "
                 f"base={PRECISION_BASE:g}", fontsize=10)
    ax.set_ylim(1e-18, 1)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


# --------------------------------------------------------------------------------------
# Worked example (rope-ref example)
# --------------------------------------------------------------------------------------


def _vec(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{float(a):.4f}" for a in v) + "]"


def worked_example(path: Path) -> None:
    """CSV: 4 tokens, d=4: x, sinusoidal PE, x + PE, angles and RoPE(x) (interleaved)."""
    x = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0],
                  [0.5, 0.5, 0.5, 0.5]])
    positions = np.arange(4)
    spec = rr.RopeSpec(head_dim=4, layout="interleaved")
    pe = np.asarray(rr.sinusoidal_embedding(positions, 4))
    angles = np.asarray(rr.rope_angles(spec, positions))
    rotated = np.asarray(rr.apply_rope(x, spec))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["p", "token x", "sinusoidal PE(p)", "x + PE(p)",
                         "angles (p·1, p/100)", "RoPE(x) at p"])
        for p in positions:
            writer.writerow([str(p), _vec(x[p]), _vec(pe[p]), _vec(x[p] + pe[p]),
                             f"({angles[p, 0]:g}, {angles[p, 1]:g})", _vec(rotated[p])])


def main(outdir: str | os.PathLike[str]) -> list[Path]:
    """Write every figure and table into `outdir`; return the paths written."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = {
        "layouts.png": layouts_figure,
        "layout_conversion.png": conversion_figure,
        "angle_error.png": angle_error_figure,
        "precision_table.csv": precision_table,
        "worked_example.csv": worked_example,
    }
    written = []
    for name, job in jobs.items():
        job(out / name)
        written.append(out / name)
    for module in _topic_modules():
        written.extend(module.make(out))
    return written


def _topic_modules() -> list[ModuleType]:
    """The figure modules of the other pages: ``fig_*.py`` beside this file.

    Each defines ``make(outdir: Path) -> list[Path]`` and writes its figures there.
    """
    here = Path(__file__).resolve().parent
    modules = []
    for path in sorted(here.glob("fig_*.py")):
        spec = importlib.util.spec_from_file_location(f"rope_ref_docs_{path.stem}", path)
        if spec is None or spec.loader is None:
            msg = f"cannot load {path}"
            raise ImportError(msg)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "_static" / "figures"
    for written_path in main(sys.argv[1] if len(sys.argv) > 1 else default):
        print(written_path)
