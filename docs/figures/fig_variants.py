"""Figures of the Variants pages: each rule's inverse frequencies (or scales) against plain RoPE.

Every curve is computed by rope_ref itself (`rr.inv_freq`, `rr.rope_cos_sin`,
`rr.pair_axes`, `rr.axial_freqs`); nothing is restated here.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

import rope_ref as rr
from rope_ref import scaling

D, BASE = 128, 10000.0


def _plain(d: int = D, base: float = BASE) -> np.ndarray:
    return rr.inv_freq(rr.RopeSpec(d, base=base))


def _frequency_figure(
    path: Path,
    title: str,
    curves: dict[str, np.ndarray],
    *,
    base: float = BASE,
    bands: dict[str, float] | None = None,
    note: str = "",
) -> Path:
    """Left: inverse frequency per pair (log). Right: wavelength 2*pi/theta per pair (log)."""
    plain = _plain(D, base)
    j = np.arange(D // 2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.8))
    left.semilogy(j, plain, color="black", lw=2, label="plain RoPE")
    with np.errstate(divide="ignore"):
        right.semilogy(j, 2 * np.pi / plain, color="black", lw=2, label="plain RoPE")
        for (label, theta), style in zip(curves.items(), ("--", "-", "-.", ":"), strict=False):
            shown = np.where(theta > 0, theta, np.nan)
            left.semilogy(j, shown, ls=style, lw=1.8, label=label)
            right.semilogy(j, 2 * np.pi / shown, ls=style, lw=1.8, label=label)
    for name, wavelength in (bands or {}).items():
        right.axhline(wavelength, color="gray", ls=":", lw=1)
        right.text(0.5, wavelength * 1.15, name, fontsize=7, color="gray")
    left.set_xlabel("pair index j")
    left.set_ylabel(r"inverse frequency $\theta_j$ (rad / position)")
    right.set_xlabel("pair index j")
    right.set_ylabel(r"wavelength $2\pi/\theta_j$ (positions)")
    for ax in (left, right):
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{title}   (rotary_dim={D}, base={base:g}){note}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _inv(rule: rr.ScalingRule, *, base: float = BASE, seq_len: float | None = None) -> np.ndarray:
    return rr.inv_freq(rr.RopeSpec(D, base=base, scaling=rule), seq_len=seq_len)


def linear(out: Path) -> Path:
    curves = {f"Linear({s:g})": _inv(scaling.Linear(s)) for s in (4.0, 16.0)}
    return _frequency_figure(out / "variant_linear.png", "Linear (position interpolation)", curves)


def ntk(out: Path) -> Path:
    curves = {f"NTKAware({s:g})": _inv(scaling.NTKAware(s)) for s in (4.0, 16.0)}
    curves["Linear(16) for comparison"] = _inv(scaling.Linear(16.0))
    return _frequency_figure(out / "variant_ntk.png", "NTK-aware base rescale", curves)


def dynamic_ntk(out: Path) -> Path:
    rule = scaling.DynamicNTK(4.0, max_position=4096)
    curves = {f"seq_len={n:,}": _inv(rule, seq_len=n) for n in (4096, 8192, 32768)}
    return _frequency_figure(
        out / "variant_dynamic_ntk.png",
        "DynamicNTK(4, max_position=4096)",
        curves,
        note="\nseq_len <= 4096 is plain RoPE",
    )


def yarn(out: Path) -> Path:
    curves = {
        "YaRN(16, 4096)": _inv(scaling.YaRN(16.0, 4096)),
        "YaRN(16, 4096, truncate=False)": _inv(scaling.YaRN(16.0, 4096, truncate=False)),
        "YaRN(16, 4096, beta_fast=8, beta_slow=2)": _inv(
            scaling.YaRN(16.0, 4096, beta_fast=8.0, beta_slow=2.0)
        ),
    }
    bands = {f"L0/β: β={b:g} turns in L0=4096": 4096 / b for b in (32.0, 1.0)}
    return _frequency_figure(out / "variant_yarn.png", "YaRN", curves, bands=bands)


def llama3(out: Path) -> Path:
    base = 500000.0
    rule = scaling.Llama3(8.0, 8192, low_freq_factor=1.0, high_freq_factor=4.0)
    curves = {
        "Llama3(8, 8192, 1, 4)": _inv(rule, base=base),
        "Linear(8)": _inv(scaling.Linear(8.0), base=base),
    }
    bands = {"L0 / low_freq_factor": 8192.0, "L0 / high_freq_factor": 2048.0}
    return _frequency_figure(
        out / "variant_llama3.png", "Llama 3.1 scaling", curves, base=base, bands=bands
    )


def longrope(out: Path) -> Path:
    n = D // 2
    short = 1.0 + 0.5 * (np.arange(n) / n) ** 2
    long = 1.0 + 40.0 * (np.arange(n) / n) ** 3
    rule = scaling.LongRoPE(short, long, original_max_position=4096, factor=32.0)
    curves = {
        "seq_len <= 4096 (short_factor)": _inv(rule, seq_len=4096),
        "seq_len > 4096 (long_factor)": _inv(rule, seq_len=4097),
    }
    return _frequency_figure(
        out / "variant_longrope.png", "LongRoPE (illustrative factors)", curves
    )


def proportional(out: Path) -> Path:
    curves = {f"Proportional({p:g})": _inv(scaling.Proportional(p)) for p in (0.25, 0.5)}
    plain_partial = rr.inv_freq(rr.RopeSpec(D, rotary_dim=32))
    curves["rotary_dim=32 (partial rotary)"] = np.concatenate([plain_partial, np.zeros(48)])
    return _frequency_figure(
        out / "variant_proportional.png", "Proportional (zero frequency = no rotation)", curves
    )


def xpos(out: Path) -> Path:
    d, seq = 64, 2048
    spec = rr.RopeSpec(d, xpos=rr.XPos(512.0))
    positions = np.arange(seq)
    cos_q, sin_q = rr.rope_cos_sin(spec, positions, role="query")
    scale = np.hypot(np.asarray(cos_q), np.asarray(sin_q))  # |scale * e^{i phi}|
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    for j in (0, 8, 16, 31):
        ax.semilogy(
            positions,
            np.abs(scale[:, j]),
            lw=1.4,
            label=rf"pair {j}: $\zeta_j$={rr.XPos(512.0).zeta(d)[j]:.3f}",
        )
    ax.axvline(seq // 2, color="gray", ls=":", lw=1)
    ax.text(seq // 2 + 20, 1.2, "centre = seq_len // 2", fontsize=8, color="gray")
    ax.set_xlabel("position p")
    ax.set_ylabel("query scale (keys: its inverse)")
    ax.set_title(f"XPos(scale_base=512), rotary_dim={d}, seq_len={seq}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "variant_xpos.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def mrope(out: Path) -> Path:
    specs = {
        "chunked, sections=(16, 24, 24) (Qwen2/2.5-VL)": rr.RopeSpec(128, sections=(16, 24, 24)),
        "interleaved, sections=(24, 20, 20) (Qwen3-VL)": rr.RopeSpec(
            128, sections=(24, 20, 20), section_order="interleaved"
        ),
    }
    fig, axes = plt.subplots(2, 1, figsize=(10.5, 2.6))
    cmap = mpl.colors.ListedColormap(["tab:blue", "tab:orange", "tab:green"])
    for ax, (label, spec) in zip(axes, specs.items(), strict=True):
        ax.imshow(rr.pair_axes(spec)[None, :], aspect="auto", cmap=cmap, vmin=0, vmax=2)
        ax.set_yticks([])
        ax.set_title(label, fontsize=9)
    axes[-1].set_xlabel("pair index j (inverse frequency falls from left to right)")
    fig.text(0.99, 0.02, "blue: t   orange: h   green: w", ha="right", fontsize=8)
    fig.tight_layout()
    path = out / "variant_mrope.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def axial(out: Path) -> Path:
    sections = (32, 32)
    curves = {
        "axial_freqs((32, 32)): ladder restarts per axis": np.array(rr.axial_freqs(sections)),
        "M-RoPE sections=(32, 32): one ladder": _plain(),
    }
    j = np.arange(D // 2)
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for label, theta in curves.items():
        ax.semilogy(j, theta, lw=1.6, label=label)
    ax.axvline(31.5, color="gray", ls=":", lw=1)
    ax.text(2, 2e-4, "axis 0 (rows)", fontsize=8)
    ax.text(34, 2e-4, "axis 1 (columns)", fontsize=8)
    ax.set_xlabel("pair index j")
    ax.set_ylabel(r"inverse frequency $\theta_j$")
    ax.set_title("Axial 2-D RoPE vs M-RoPE, head_dim=128", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "variant_axial.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def make(outdir: Path) -> list[Path]:
    """Write the Variants figures into `outdir`; return their paths."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = (linear, ntk, dynamic_ntk, yarn, llama3, longrope, proportional, xpos, mrope, axial)
    return [job(out) for job in jobs]


if __name__ == "__main__":
    import sys

    for written in make(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/variant_figures")):
        print(written)
