"""`rope-ref verify`: the engine's invariants, measured on every namespace and backend."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np

from rope_ref._core.aliases import Array, ArrayNamespace, BackendName, Form
from rope_ref._core.compat import array_namespace, to_numpy
from rope_ref._core.error_model import tolerance
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope, apply_rope_qk
from rope_ref._engine.dispatch import available_backends
from rope_ref._engine.layout import convert_layout
from rope_ref.cli.verify_cuda import cuda_checks

__all__ = ["Check", "describe_setup", "run_checks"]

NAMESPACES = ("numpy", "array_api_strict", "torch", "jax.numpy", "dask.array", "cupy")
KERNEL_NAMESPACE: dict[BackendName, str] = {"numba": "numpy", "cupy": "cupy"}
OFFSET = 4096  # positions OFFSET .. OFFSET + SEQ - 1, large enough to exercise the angles
SHIFT = 1000  # the composition and relative-position checks move every position by this
SEQ, HEADS, BATCH = 32, 4, 2
NAMESPACE_SKIP = "not installed, or no device"
SPEC = RopeSpec(head_dim=128)  # LLaMA-style defaults: base 10000, half layout
PARTIAL = RopeSpec(head_dim=128, rotary_start=16, rotary_dim=64)
#: backend="exact" is checked on a small array, element by element against mpmath
EXACT_SHAPE, EXACT_SPEC = (1, 4, 2, 8), RopeSpec(head_dim=8)
EXACT_CHECK = "equals mpmath rounded once (ulps)"
_MANTISSA_BITS = {"float64": 53, "float32": 24}


@dataclass(frozen=True)
class Check:
    """One measured invariant: its error, the tolerance it must meet, and the verdict."""

    namespace: str
    backend: str
    dtype: str
    check: str
    error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        """Whether the measured error is within tolerance (NaN fails)."""
        return bool(self.error <= self.tolerance)

    def as_dict(self) -> dict[str, object]:
        """The check as a JSON-ready dict."""
        return {**asdict(self), "passed": self.passed}


def _namespace(name: str) -> ArrayNamespace | None:
    try:
        module = importlib.import_module(name)
        if name == "jax.numpy":
            importlib.import_module("jax").config.update("jax_enable_x64", True)
        if name == "cupy":
            module.cuda.runtime.getDeviceCount()
    except Exception:  # not installed, or no device: skipped, and listed as such
        return None
    return array_namespace(module.asarray([0.0]))


def _max_abs(a: Array, b: Array | np.ndarray) -> float:
    diff = np.abs(to_numpy(a).astype(np.float64) - np.asarray(to_numpy(b), dtype=np.float64))
    return float(np.max(diff)) if diff.size else 0.0


def _exact_rotation(x: np.ndarray, spec: RopeSpec, positions: np.ndarray) -> np.ndarray:
    """Independent per-pair loop in Python floats (math.cos / math.sin, float64 pow)."""
    out = x.astype(np.float64)
    n = spec.n_pairs
    for s, p in enumerate(positions):
        for j in range(n):
            phi = float(p) * spec.base ** (-2.0 * j / spec._rotary_dim)
            c, si = math.cos(phi), math.sin(phi)
            a, b = x[:, s, :, j].astype(np.float64), x[:, s, :, j + n].astype(np.float64)
            out[:, s, :, j], out[:, s, :, j + n] = a * c - b * si, b * c + a * si
    return out


def _checks(
    xp: ArrayNamespace, backend: BackendName, dtype_name: str
) -> Iterator[tuple[str, float, float]]:
    spec = SPEC
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((BATCH, SEQ, HEADS, spec.head_dim)).astype(dtype_name)
    dtype = getattr(xp, dtype_name)
    x = xp.asarray(x_host, dtype=dtype)
    eps = float(np.finfo(dtype_name).eps)
    positions = np.arange(SEQ) + OFFSET
    top = float(positions[-1]) + SHIFT  # the largest angle: theta_0 = 1
    size = float(np.max(np.abs(x_host)))
    tol = tolerance(eps, max_angle=top, magnitude=size)

    def rope(
        a: Array,
        p: np.ndarray,
        *,
        inverse: bool = False,
        form: Form = "rotate_half",
        rope_spec: RopeSpec = spec,
    ) -> Array:
        return apply_rope(
            a, rope_spec, xp.asarray(p), seq_axis=-3, backend=backend, inverse=inverse, form=form
        )

    y = rope(x, positions)
    yield "matches exact rotation", _max_abs(y, _exact_rotation(x_host, spec, positions)), tol
    yield "position 0 is identity", _max_abs(rope(x, np.zeros(SEQ, dtype=np.int64)), x_host), 0.0
    norms = np.linalg.norm(to_numpy(y).astype(np.float64), axis=-1)
    yield (
        "norm preserved",
        float(np.max(np.abs(norms - np.linalg.norm(x_host, axis=-1)))),
        (tolerance(eps, max_angle=top, magnitude=size * math.sqrt(spec.head_dim))),
    )
    yield "inverse undoes", _max_abs(rope(y, positions, inverse=True), x_host), 2 * tol
    composed = rope(rope(x, positions), np.full(SEQ, SHIFT))
    yield "R_a R_b = R_(a+b)", _max_abs(composed, rope(x, positions + SHIFT)), 3 * tol
    yield "relative position", *_relative(xp, x, spec, positions, backend, eps, top)
    if backend == "reference":
        forms: tuple[Form, ...] = ("complex", "matrix")
        for form in forms:
            yield f"form {form} = rotate_half", _max_abs(rope(x, positions, form=form), y), tol
    spec_i = RopeSpec(head_dim=128, layout="interleaved")
    via_half = convert_layout(y, spec_i, src="half", dst="interleaved")
    direct = rope(
        convert_layout(x, spec_i, src="half", dst="interleaved"), positions, rope_spec=spec_i
    )
    yield "layouts commute", _max_abs(via_half, direct), 0.0
    yp = to_numpy(rope(x, positions, rope_spec=PARTIAL))
    untouched = np.concatenate(
        [yp[..., :16] - x_host[..., :16], yp[..., 80:] - x_host[..., 80:]], axis=-1
    )
    yield "partial rotary pass-through", float(np.max(np.abs(untouched))), 0.0


def _mpmath_rotation(x: np.ndarray, positions: np.ndarray, dtype_name: str) -> np.ndarray:
    """Independent: each element's real RoPE in mpmath at 200 bits, rounded once to the dtype.

    The angle is ``p * base ** (-2j / d)`` with the real power; ``+value`` at the dtype's
    precision rounds to nearest even (the values are normal, far from under- or overflow).
    """
    import mpmath

    spec = EXACT_SPEC
    out = np.empty(x.shape, dtype=np.float64)
    n = spec.n_pairs
    with mpmath.workprec(200):
        for s, p in enumerate(positions):
            for j in range(n):
                w = mpmath.power(mpmath.mpf(spec.base), mpmath.mpf(-2 * j) / spec._rotary_dim)
                c, si = mpmath.cos(int(p) * w), mpmath.sin(int(p) * w)
                for b, h in np.ndindex(x.shape[0], x.shape[2]):
                    first, second = (mpmath.mpf(float(v)) for v in x[b, s, h, [j, j + n]])
                    for index, value in (
                        (j, first * c - second * si),
                        (j + n, second * c + first * si),
                    ):
                        with mpmath.workprec(_MANTISSA_BITS[dtype_name]):
                            out[b, s, h, index] = float(+value)
    return out


def _exact_error(dtype_name: str) -> float:
    """Largest distance, in ulps, of backend="exact" from `_mpmath_rotation` (0 expected)."""
    x = np.random.default_rng(1).standard_normal(EXACT_SHAPE).astype(dtype_name)
    positions = np.arange(EXACT_SHAPE[1]) + OFFSET
    got = apply_rope(x, EXACT_SPEC, positions, seq_axis=-3, backend="exact")
    want = _mpmath_rotation(x, positions, dtype_name)
    spacing = np.spacing(np.abs(want).astype(dtype_name)).astype(np.float64)
    return float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want) / spacing))


def _relative(
    xp: ArrayNamespace,
    x: Array,
    spec: RopeSpec,
    positions: np.ndarray,
    backend: BackendName,
    eps: float,
    top: float,
) -> tuple[float, float]:
    """Largest change of any score <R_m q, R_n k> when all positions shift by SHIFT."""
    k = xp.flip(x, axis=1)
    scores = []
    for shift in (0, SHIFT):
        q_rot, k_rot = apply_rope_qk(
            x, k, spec, xp.asarray(positions + shift), seq_axis=-3, backend=backend
        )
        q_np, k_np = to_numpy(q_rot).astype(np.float64), to_numpy(k_rot).astype(np.float64)
        scores.append(np.einsum("bshd,bthd->bhst", q_np, k_np))
    error = float(np.max(np.abs(scores[0] - scores[1])))
    norm = float(np.max(np.linalg.norm(to_numpy(x).astype(np.float64), axis=-1)))
    return error, 2 * tolerance(eps, max_angle=top, magnitude=norm * norm)


def run_checks(progress: Callable[[str], None] | None = None) -> tuple[list[Check], list[str]]:
    """Run every check on every usable namespace and backend; return checks and skips.

    Each skip reads ``"namespace NAME: why"`` or ``"backend NAME: why"``.
    """
    results: list[Check] = []
    skipped: list[str] = []
    backends = available_backends()
    for name in NAMESPACES:
        xp = _namespace(name)
        if xp is None:
            skipped.append(f"namespace {name}: {NAMESPACE_SKIP}")
            continue
        kernels = [b for b, ns in KERNEL_NAMESPACE.items() if ns == name and backends[b] is None]
        for backend in ("reference", *kernels):
            if progress is not None:
                progress(f"checking {name} with backend={backend!r}")
            for dtype_name in ("float64", "float32"):
                for check, error, tol in _checks(xp, backend, dtype_name):
                    results.append(Check(name, backend, dtype_name, check, error, tol))
    if "exact" in backends and backends["exact"] is None:  # else a skip below says why
        if progress is not None:
            progress("checking numpy with backend='exact'")
        for dtype_name in ("float64", "float32"):
            error = _exact_error(dtype_name)
            results.append(Check("numpy", "exact", dtype_name, EXACT_CHECK, error, 0.0))
    cuda_rows, cuda_skipped = cuda_checks(backends.get("cupy"), progress)  # says why not
    results += [Check(*row) for row in cuda_rows]
    skipped += [f"backend {b}: {why}" for b, why in backends.items() if why and b != "cupy"]
    return results, skipped + cuda_skipped


def describe_setup() -> dict[str, str]:
    """What `run_checks` measures: the spec, the inputs, and where the tolerances come from.

    Examples
    --------
    >>> sorted(describe_setup())
    ['error model', 'inputs', 'spec']
    """
    first, last = OFFSET, OFFSET + SEQ - 1
    top = last + SHIFT
    return {
        "spec": f"RopeSpec(head_dim={SPEC.head_dim}): base {SPEC.base:g}, layout "
        f"{SPEC.layout!r}, all {SPEC.rotary_dim} features rotated (LLaMA defaults); also "
        f"layout 'interleaved', and rotary_start={PARTIAL.rotary_start}, "
        f"rotary_dim={PARTIAL.rotary_dim}",
        "inputs": f"x ~ N(0, 1) of shape {(BATCH, SEQ, HEADS, SPEC.head_dim)} "
        f"(batch, seq, heads, head_dim) along seq_axis=-3, positions {first}..{last} "
        f"(and {first + SHIFT}..{top} where a check shifts them by {SHIFT})",
        "error model": "tolerance = |x|max * (2 eps(dtype) + 4 eps(float64) * (|angle|max + 1))"
        f": two roundings to the dtype plus the float64 angle error at the largest angle, "
        f"{top} rad; norms and scores scale it by their size (docs: precision.md)",
    }


def print_table(results: list[Check], skipped: list[str], *, wide: bool = False) -> None:
    """Print what was tested, the checks as a table, the skips and the verdict."""
    from rope_ref.cli.tables import Column
    from rope_ref.cli.tables import print_table as show

    for name, text in describe_setup().items():
        print(f"{name}: {text}")
    print()
    columns = [
        *(Column(h) for h in ("namespace", "backend", "dtype")),
        Column("check", wrap=True),
        *(Column(h, "right") for h in ("max error", "tolerance")),
        Column("result"),
    ]
    rows = [
        (r.namespace, r.backend, r.dtype, r.check, f"{r.error:.2e}", f"{r.tolerance:.2e}", verdict)
        for r in results
        for verdict in ["ok" if r.passed else "FAIL"]
    ]
    show(columns, rows, wide=wide)
    print()
    for line in summarise_skips(skipped):
        print(f"skipped: {line}")
    failures = sum(not r.passed for r in results)
    namespaces = sum(s.startswith("namespace ") for s in skipped)
    print(
        f"{len(results) - failures} passed, {failures} failed; skipped {namespaces} "
        f"namespace(s) and {len(skipped) - namespaces} backend(s)"
    )


def summarise_skips(skipped: list[str]) -> list[str]:
    """Skips for people: the namespaces skipped for the same reason on one line.

    Examples
    --------
    >>> summarise_skips(["namespace torch: why", "namespace cupy: why", "backend numba: how"])
    ['namespaces torch, cupy: why', 'backend numba: how']
    """
    grouped: dict[str, list[str]] = {}
    lines: list[str] = []
    for entry in skipped:
        head, _, why = entry.partition(": ")
        kind, _, name = head.partition(" ")
        if kind == "namespace":
            grouped.setdefault(why, []).append(name)
        else:
            lines.append(entry)
    named = [
        f"namespace{'s' if len(names) > 1 else ''} {', '.join(names)}: {why}"
        for why, names in grouped.items()
    ]
    return named + lines
