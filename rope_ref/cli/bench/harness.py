"""Benchmark harness behind `rope-ref bench`: backends and peers against a same-run copy.

Every case is one array shape ``(batch, seq, heads, head_dim)`` and dtype, rotated along
``seq_axis=-3``. Each implementation is timed call by call in interleaved rounds (one
call of each per round), so that a machine whose load drifts slows all of them alike and
the ratios stay meaningful; the median is reported. Each sample follows one untimed call
of its own implementation, which absorbs what the previous one left behind, and, on the
CPU, a pause of `IDLE_S` before it: thread pools keep their threads spinning for a while
after a call (ONNX Runtime's for 5 to 20 ms, OpenMP's, ggml's), and a row timed while
the previous row's threads still spin shares the cores with them (on two cores, a
two-thread numba call after ONNX Runtime took 14-16 ms instead of 6.3). Throughput
counts the bytes that must move: `x` read once and the output written once (the cos/sin
tables are small and not counted). The baseline is a copy of the same array with the
same threads, measured in the same rounds.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from rope_ref.cli.bench.rows import Case, Impl, Unavailable

__all__ = ["Case", "Result", "failed_note", "rows", "run_case", "sweep_cases"]

#: Implementations slower than this per call run in the first `SLOW_ROUNDS` rounds only
#: (every row gets at least that many samples, enough for quartiles).
SLOW_CALL_S = 0.25
SLOW_ROUNDS = 7
#: A row whose quartiles lie further apart than this share of its median is flagged:
#: its median moves too much from run to run to compare closely.
UNSTEADY_SPREAD = 0.25
#: Warm-up (at least WARMUP_CALLS calls and WARMUP_S seconds, at most MAX_WARMUP_CALLS
#: calls) and the shortest sample (calls are repeated to fill it).
WARMUP_CALLS = 3
WARMUP_S = 0.3
MAX_WARMUP_CALLS = 50
MIN_SAMPLE_S = 2e-3
MAX_REPEAT = 10_000
#: Seconds without work before each CPU row's untimed call: long enough for every thread
#: pool (ONNX Runtime's spins up to about 20 ms) to stop spinning on the cores.
IDLE_S = 0.03


@dataclasses.dataclass(frozen=True)
class Result:
    """The timing of one implementation on one case."""

    case: Case
    name: str
    kind: str  # "baseline", "backend" or "peer"
    median_s: float | None
    samples: int
    gb_per_s: float | None
    percent_of_copy: float | None
    speedup_vs_reference: float | None
    note: str = ""
    #: The first and third quartiles of the samples (seconds per call).
    q1_s: float | None = None
    q3_s: float | None = None

    @property
    def spread(self) -> float | None:
        """The quartiles' distance as a share of the median (None without samples).

        Examples
        --------
        >>> r = Result(Case((1, 1, 1, 2), "float32"), "x", "backend", 2.0, 5, None, None,
        ...            None, q1_s=1.5, q3_s=2.5)
        >>> r.spread, r.unsteady
        (0.5, True)
        """
        if self.median_s is None or self.q1_s is None or self.q3_s is None:
            return None
        return (self.q3_s - self.q1_s) / self.median_s

    @property
    def unsteady(self) -> bool:
        """Whether the spread is too wide to trust the median closely."""
        return self.spread is not None and self.spread > UNSTEADY_SPREAD

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        out = dataclasses.asdict(self)
        out["spread"], out["unsteady"] = self.spread, self.unsteady
        out["case"] = {
            "shape": list(self.case.shape),
            "dtype": self.case.dtype,
            "device": self.case.device,
            "qk": self.case.qk,
            "sequences": self.case.sequences,
            "k_heads": self.case.k_heads,
            "device_positions": self.case.device_positions,
        }
        return out


def rows(case: Case) -> list[Impl]:
    """The rows to time for `case`, baseline first: the CPU rows, or the GPU path's."""
    if case.device in ("gpu", "host"):
        from rope_ref.cli.bench.gpu import gpu_implementations, host_implementations

        return (gpu_implementations if case.device == "gpu" else host_implementations)(case)
    from rope_ref.cli.bench.cpu import implementations

    return implementations(case)


def run_case(
    case: Case,
    *,
    only: Sequence[str] | None = None,
    rounds: int = 15,
    progress: Callable[[str, int], None] | None = None,
) -> list[Result]:
    """Time every row available for `case` (those named in `only`, and the baseline).

    `progress` is called with what is being done and the rounds just finished (0 or 1).
    """
    impls = [i for i in rows(case) if only is None or i.name in only or i.kind == "baseline"]
    x = np.random.default_rng(0).standard_normal(case.shape).astype(_host_dtype(case.dtype))
    runners: dict[str, Callable[[], object]] = {}
    notes: dict[str, str] = {}
    for impl in impls:
        if progress is not None:
            progress(f"{case.label}: preparing {impl.name}", 0)
        try:
            runners[impl.name] = _batched(impl.prepare(x), case.device)
        except Unavailable as why:
            notes[impl.name] = str(why)
        except Exception as err:  # a peer that fails on this case: reported, not fatal
            if impl.kind != "peer":
                raise
            notes[impl.name] = failed_note(err)
    samples = _interleaved(runners, case, rounds, progress)
    return _summarise(case, impls, samples, notes)


def failed_note(err: BaseException) -> str:
    """The note of a peer row that raised `err` while preparing or warming up.

    Examples
    --------
    >>> failed_note(ZeroDivisionError("division by zero"))
    'failed here: ZeroDivisionError: division by zero'
    """
    text = " ".join(str(err).split())
    if len(text) > 160:
        text = text[:157] + "..."
    return (
        f"failed here: {type(err).__name__}: {text}"
        if text
        else f"failed here: {type(err).__name__}"
    )


def _host_dtype(name: str) -> np.dtype[Any]:
    """NumPy's dtype of that name; bfloat16 comes from ml_dtypes."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            msg = "bfloat16 cases need ml_dtypes: pip install ml_dtypes"
            raise Unavailable(msg) from None
        bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    return np.dtype(name)


def _interleaved(
    runners: dict[str, Callable[[], object]],
    case: Case,
    rounds: int,
    progress: Callable[[str, int], None] | None,
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(rounds):
        for name, run in runners.items():
            times = samples[name]
            if r >= SLOW_ROUNDS and times and statistics.median(times) > SLOW_CALL_S:
                continue
            if case.device == "cpu":
                _idle()  # the previous row's spinning threads stop
            getattr(run, "once", run)()  # settle: absorb what the previous row left behind
            times.append(_time_call(run, case.device))
        if progress is not None:
            progress(f"{case.label}: round {r + 1}/{rounds}", 1)
    return samples


def _idle() -> None:
    """Leave the CPUs to other threads for `IDLE_S` (see the module's docstring)."""
    time.sleep(IDLE_S)


def _batched(run: Callable[[], object], device: str) -> Callable[[], object]:
    """`run`, warmed up, repeated enough per sample to last about `MIN_SAMPLE_S`.

    Timing a call of a few microseconds on its own measures the clock; a sample of many
    calls divided by their number measures the call.
    """
    start = time.perf_counter()  # compile, fill caches, fault pages in, settle JITs
    for calls in itertools.count(1):
        run()
        if calls >= MAX_WARMUP_CALLS or (
            calls >= WARMUP_CALLS and time.perf_counter() - start > WARMUP_S
        ):
            break
    once = _time_call(run, device)
    repeat = min(MAX_REPEAT, max(1, int(MIN_SAMPLE_S / max(once, 1e-9))))
    if repeat == 1:
        return run

    def batch() -> object:
        for _ in range(repeat - 1):
            run()
        return run()

    batch.repeat = repeat  # type: ignore[attr-defined]
    batch.once = run  # type: ignore[attr-defined]
    return batch


def _time_call(run: Callable[[], object], device: str) -> float:
    repeat = getattr(run, "repeat", 1)
    if device == "gpu":
        from rope_ref.cli.bench.gpu import gpu_time

        return gpu_time(run) / repeat
    if device == "host":  # the host work itself: this thread's CPU time, whatever else runs
        start = time.thread_time()
        run()
        return (time.thread_time() - start) / repeat
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) / repeat


def _summarise(
    case: Case, impls: Iterable[Impl], samples: dict[str, list[float]], notes: dict[str, str]
) -> list[Result]:
    medians = {name: statistics.median(t) for name, t in samples.items() if t}
    quartiles = {name: _quartiles(t) for name, t in samples.items() if t}
    moved = case.moved
    copy = next((medians.get(i.name) for i in impls if i.kind == "baseline"), None)
    reference = medians.get("reference")
    results = []
    for impl in impls:
        m = medians.get(impl.name)
        results.append(
            Result(
                case=case,
                name=impl.name,
                kind=impl.kind,
                median_s=m,
                samples=len(samples.get(impl.name, [])),
                gb_per_s=None if m is None else moved / m / 1e9,
                percent_of_copy=None if m is None or copy is None else 100.0 * copy / m,
                speedup_vs_reference=None if m is None or reference is None else reference / m,
                note=notes.get(impl.name, impl.note),
                q1_s=quartiles.get(impl.name, (None, None))[0],
                q3_s=quartiles.get(impl.name, (None, None))[1],
            )
        )
    return results


def _quartiles(times: list[float]) -> tuple[float, float]:
    """First and third quartiles (one sample: itself twice).

    Examples
    --------
    >>> _quartiles([1.0, 2.0, 3.0, 4.0, 5.0])
    (2.0, 4.0)
    """
    if len(times) < 2:
        return times[0], times[0]
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q1, q3


def sweep_cases(
    lengths: Iterable[int], *, heads: int = 32, head_dim: int = 128, dtype: str = "float32"
) -> list[Case]:
    """One prefill case per sequence length, batch 1.

    Examples
    --------
    >>> [c.shape for c in sweep_cases([1, 4])]
    [(1, 1, 32, 128), (1, 4, 32, 128)]
    """
    return [Case((1, s, heads, head_dim), dtype) for s in lengths]
