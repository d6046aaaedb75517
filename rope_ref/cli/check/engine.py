"""The engine of `rope-ref check`: drive a callable with Hypothesis, shrink, diagnose.

The engine never calls the target itself: it calls a `Caller`, which runs the target on a
case and hands back its results (`rope-ref check`'s caller runs it in a child process and
returns data). The oracle's inputs are rebuilt here from the case, so the verdict does not
depend on anything the target can reach. Nothing here prints; `rope_ref.cli.check` turns a
`Report` into text and an exit status.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check.cases import (
    CheckConfig,
    drawn_cases,
    probe_case,
    probe_positions,
    single_case,
)
from rope_ref.cli.check.conventions import (
    Case,
    OutputError,
    Returned,
    TargetError,
    TargetTimeoutError,
    oracle_setup,
)
from rope_ref.cli.check.target import UsageError, describe_exception, load_target
from rope_ref.testing._compare import Comparison
from rope_ref.testing._describe import describe_worst
from rope_ref.testing._diagnosis import Diagnosis, diagnose
from rope_ref.testing._report import PRECISION_CLASSES, max_angle_error, precision_class
from rope_ref.testing._tolerance import max_checkable_position

__all__ = [
    "Caller",
    "CheckConfig",
    "Report",
    "UsageError",
    "check",
    "describe_exception",
    "load_target",
]

#: Runs the target on a case under a spec and returns its results: in `rope-ref check`, a
#: call of the target in the child process (`rope_ref.cli.check.supervise`), its results
#: as data.
Caller = Callable[[Case, RopeSpec], list[Returned]]


@dataclass
class Evaluation:
    """One call of the checked function: comparisons, or what went wrong."""

    comparisons: list[tuple[str, Comparison]] = field(default_factory=list)
    error: str | None = None  # what the target raised, described
    output_error: str | None = None
    max_ulps: float | None = None  # largest ulp error of the results, once judged in ulps
    ulps_failure: str | None = None  # the worst element, when over the bound in ulps

    @property
    def ok(self) -> bool:
        """Whether the call returned results that all match the oracle (in ulps too)."""
        return (
            self.error is None
            and self.output_error is None
            and self.ulps_failure is None
            and all(c.ok for _, c in self.comparisons)
        )

    def judge_ulps(self, max_ulps: float) -> None:
        """Measure the results' errors in ulps; note the worst element if over `max_ulps`."""
        from rope_ref.testing._ulps import check_ulps, ulp_errors

        for label, c in self.comparisons:
            worst = float(np.max(ulp_errors(c), initial=0.0))
            self.max_ulps = max(worst, self.max_ulps or 0.0)
            if worst > max_ulps and self.ulps_failure is None:
                try:
                    check_ulps(c, max_ulps)
                except AssertionError as err:
                    self.ulps_failure = f"{label}: {err}"

    def worst(self) -> tuple[str, Comparison] | None:
        """The compared output with the largest error relative to its tolerance."""
        if not self.comparisons:
            return None
        return max(self.comparisons, key=lambda lc: float(np.max(lc[1].ratio, initial=0.0)))


@dataclass
class Report:
    """The verdict of a check, and what supports it."""

    status: str  # "conformant", "mismatch", "error", "not_checkable"
    layout: str
    layout_note: str
    examples: int
    max_error: float = 0.0
    max_ratio: float = 0.0
    precision: str = PRECISION_CLASSES[0]
    max_angle_error: float = 0.0
    model: str = ""
    counterexample: Case | None = None
    worst: str | None = None
    diagnosis: Diagnosis | None = None
    error: str | None = None
    details: list[str] = field(default_factory=list)
    checkable_to: int | None = None  # largest checkable position, when less than asked
    reproducer: list[str] | None = None  # Python lines that replay the counterexample
    max_ulps: float | None = None  # largest ulp error, probe and examples (with --max-ulps)

    @property
    def exit_status(self) -> int:
        """0 when conformant, 1 otherwise."""
        return 0 if self.status == "conformant" else 1


#: Largest position of the layout probe: the pairing shows at small positions, and
#: positions past float16's largest integer-safe range would turn such a target's result to
#: NaN and hide it.
LAYOUT_PROBE_MAX = 2048

# -- evaluating --------------------------------------------------------------------------------


def evaluate(call: Caller, cfg: CheckConfig, spec: RopeSpec, case: Case) -> Evaluation:
    """Run the target on `case` and compare every result with the oracle.

    The oracle's setup of each result is rebuilt here from `case` and `spec` (copies the
    target never sees), not read from what the call returns.
    """
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the checked code's warnings are not verdicts
            returned = call(case, copy.deepcopy(spec))  # the target's copy, never the oracle's
    except TargetError as err:
        return Evaluation(error=err.description or describe_exception(err.error))
    except OutputError as err:
        return Evaluation(output_error=str(err))
    evaluation = Evaluation()
    for out in returned:
        s = oracle_setup(cfg.calling, case, spec, out.label)
        shape = tuple(getattr(out.actual, "shape", ()))
        if shape != s.x.shape:
            evaluation.output_error = (
                f"the result for {out.label} has shape {shape}; expected {s.x.shape}."
            )
            return evaluation
        try:
            c = cfg.judging.compare(out.actual, s)
        except (TypeError, ValueError) as err:
            evaluation.output_error = f"the result for {out.label} cannot be compared: {err}"
            return evaluation
        evaluation.comparisons.append((out.label, c))
    return evaluation


def _spec_with_layout(spec: RopeSpec, layout: str) -> RopeSpec:
    return dataclasses.replace(spec, layout=layout)  # type: ignore[arg-type]


def detect_layout(call: Caller, cfg: CheckConfig) -> tuple[str, str]:
    """The layout to check against, and a note on how it was chosen."""
    if cfg.layout != "auto":
        return cfg.layout, "as the spec says" if cfg.layout == cfg.spec.layout else "as given"
    scores: dict[str, float] = {}
    small = probe_positions(min(cfg.max_position, LAYOUT_PROBE_MAX))  # inside float16's range
    for layout in ("half", "interleaved"):
        ev = evaluate(call, cfg, _spec_with_layout(cfg.spec, layout), probe_case(cfg, small))
        worst = ev.worst()
        if ev.error is not None or ev.output_error is not None or worst is None:
            scores[layout] = np.inf
        else:
            scores[layout] = float(np.max(worst[1].ratio, initial=0.0))
    best = min(scores, key=lambda k: scores[k])
    if max(scores.values()) <= 1.0:
        return cfg.spec.layout, "either matches: the target follows the spec it is given"
    if scores[best] <= 1.0:
        return best, "detected (--layout auto)"
    if np.isinf(scores[best]):
        return "half", "not detected: the probe call failed, so checked against 'half'"
    return best, "not detected: neither layout matches, so checked against the closer one"


# -- searching ---------------------------------------------------------------------------------


class _MismatchError(Exception):
    def __init__(self, case: Case, evaluation: Evaluation) -> None:
        super().__init__("mismatch")
        self.case = case
        self.evaluation = evaluation


@dataclass
class _Stats:
    examples: int = 0
    max_error: float = 0.0
    max_ratio: float = 0.0
    precision: int = 0  # index into PRECISION_CLASSES: the coarsest seen
    max_angle_error: float = 0.0
    max_ulps: float | None = None

    def add(self, ev: Evaluation) -> None:
        self.examples += 1
        if ev.max_ulps is not None:
            self.max_ulps = max(ev.max_ulps, self.max_ulps or 0.0)
        for _, c in ev.comparisons:
            if c.error.size:
                self.max_error = max(self.max_error, float(np.max(c.error)))
                self.max_ratio = max(self.max_ratio, float(np.max(c.ratio)))
                grade = PRECISION_CLASSES.index(precision_class(c))
                self.precision = max(self.precision, grade)
                self.max_angle_error = max(self.max_angle_error, max_angle_error(c))


def search(call: Caller, cfg: CheckConfig, spec: RopeSpec) -> tuple[_Stats, _MismatchError | None]:
    """Run Hypothesis over drawn cases; return statistics and the shrunk failure, if any."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

    stats = _Stats()

    @seed(cfg.seed)
    @settings(
        max_examples=cfg.examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(drawn_cases(cfg))
    def run(case: Case) -> None:
        ev = evaluate(call, cfg, spec, case)
        if cfg.max_ulps is not None and ev.ok:  # a result the tolerance accepts, in ulps
            ev.judge_ulps(cfg.max_ulps)
        stats.add(ev)
        if not ev.ok:
            raise _MismatchError(case, ev)

    try:
        run()
    except _MismatchError as found:
        return stats, found
    except BaseException as err:  # Hypothesis wraps what it cannot shrink
        timeout = _find_timeout(err)
        if timeout is not None:
            raise timeout from None
        raise
    return stats, None


def _find_timeout(err: BaseException | None) -> TargetTimeoutError | None:
    seen = 0
    while err is not None and seen < 16:
        if isinstance(err, TargetTimeoutError):
            return err
        err = err.__cause__ or err.__context__
        seen += 1
    return None


# -- diagnosing --------------------------------------------------------------------------------


def _diagnose_evaluation(ev: Evaluation) -> tuple[Diagnosis | None, str | None, Comparison | None]:
    worst = ev.worst()
    if worst is None:
        return None, None, None
    label, c = worst
    if c.ok:
        return None, None, c
    return diagnose(c), f"{label}: {describe_worst(c)}", c


def _threshold(c: Comparison) -> tuple[int, int] | None:
    """(last good, first bad) position when failures start at a position, else None."""
    rows = np.any(c.failed, axis=-1)
    p = np.abs(c.setup.row_positions)
    good = ~rows & (p > 0)
    if not np.any(rows) or not np.any(good):
        return None
    last_good, first_bad = int(np.max(p[good])), int(np.min(p[rows]))
    return (last_good, first_bad) if last_good < first_bad else None


def _refine(call: Caller, cfg: CheckConfig, spec: RopeSpec, bounds: tuple[int, int]) -> int:
    """Smallest failing position between `bounds` (bisection with one-token calls)."""
    good, bad = bounds
    while bad - good > 1:
        mid = (good + bad) // 2
        if evaluate(call, cfg, spec, single_case(cfg, mid)).ok:
            good = mid
        else:
            bad = mid
    return bad


def explain(
    call: Caller, cfg: CheckConfig, spec: RopeSpec, found: _MismatchError
) -> tuple[Diagnosis | None, str | None]:
    """Diagnosis of a failure: from the probe case when it tells more, else the minimum."""
    minimal, worst, _ = _diagnose_evaluation(found.evaluation)
    probe = evaluate(call, cfg, spec, probe_case(cfg))
    from_probe, _, c = _diagnose_evaluation(probe)
    if from_probe is None or c is None or from_probe.cause == "unknown":
        return minimal, worst
    bounds = _threshold(c)
    if from_probe.cause in ("identity", "position_range") and bounds is not None:
        first_bad = _refine(call, cfg, spec, bounds)
        near = np.arange(max(first_bad - 3, 1), min(first_bad + 3, cfg.max_position + 1))
        sharper = evaluate(call, cfg, spec, probe_case(cfg, np.concatenate([[0, 1], near])))
        refined, _, _ = _diagnose_evaluation(sharper)
        if refined is not None and refined.cause == from_probe.cause:
            return refined, worst
    return from_probe, worst


def check(call: Caller, cfg: CheckConfig) -> Report:
    """Check the target that `call` runs under `cfg` and return the verdict."""
    try:
        return _check(call, cfg)
    except TargetTimeoutError as err:
        return Report(
            status="error",
            layout=cfg.spec.layout,
            layout_note="not detected",
            examples=0,
            error=f"the checked function did not return within {err.seconds:g} s "
            "(a hang, or a first call slower than --timeout)",
        )


def _check(call: Caller, cfg: CheckConfig) -> Report:
    asked = cfg.max_position
    judged = cfg.result_dtype or cfg.calling.dtype
    limit = max_checkable_position(cfg.spec, judged, angle_dtype=cfg.model_angle_dtype or "float32")
    cfg = dataclasses.replace(cfg, max_position=min(asked, limit))
    report = _search_and_report(call, cfg)
    if asked > limit and report.status == "conformant":
        report.status = "not_checkable"
        report.checkable_to = limit
        report.details.append(
            f"positions past {limit} are not checkable in {judged}: there the "
            "error model allows half a pair's norm or more, so zeros, the identity or the "
            f"inverse rotation would pass. Conformant on positions 0..{limit}; check larger "
            "positions with a wider --dtype."
        )
    return report


def _search_and_report(call: Caller, cfg: CheckConfig) -> Report:
    layout, note = detect_layout(call, cfg)
    spec = _spec_with_layout(cfg.spec, layout)
    try:
        stats, found = search(call, cfg, spec)
    except Exception as err:  # Hypothesis gave up (e.g. a flaky, non-deterministic target)
        return Report(
            status="error",
            layout=layout,
            layout_note=note,
            examples=0,
            error=f"the search could not complete: {describe_exception(err)}",
        )
    model = ""
    sample = evaluate(call, cfg, spec, single_case(cfg, 1))
    if sample.comparisons and sample.comparisons[0][1].model is not None:
        model = sample.comparisons[0][1].model.describe()
    report = Report(
        status="conformant" if found is None else "mismatch",
        layout=layout,
        layout_note=note,
        examples=stats.examples,
        max_error=stats.max_error,
        max_ratio=stats.max_ratio,
        precision=PRECISION_CLASSES[stats.precision],
        max_angle_error=stats.max_angle_error,
        model=model,
    )
    if cfg.max_ulps is not None:
        report.max_ulps = stats.max_ulps
        check_probe_ulps(call, cfg, spec, report)
    if found is None:
        return report
    report.counterexample = found.case
    ev = found.evaluation
    if ev.error is not None:
        report.status = "error"
        report.error = f"the checked function raised {ev.error}"
    elif ev.output_error is not None:
        report.status = "error"
        report.error = ev.output_error
    elif ev.ulps_failure is not None:  # within the tolerance, over the bound in ulps
        report.worst = ev.ulps_failure
    else:
        _angles_of_counterexample(report, ev)
        try:
            report.diagnosis, report.worst = explain(call, cfg, spec, found)
        except Exception as err:  # the probes call the checked code again
            report.details.append(f"no diagnosis: {describe_exception(err)}")
    return report


def _angles_of_counterexample(report: Report, ev: Evaluation) -> None:
    """The precision class and angle error of a mismatch: those of the counterexample.

    They are read from the first result that fails, the one whose assertion the
    reproducer raises, so the summary and the replayed failure say the same numbers.
    """
    failing = next((c for _, c in ev.comparisons if not c.ok), None)
    if failing is not None:
        report.precision = precision_class(failing)
        report.max_angle_error = max_angle_error(failing)


def check_probe_ulps(call: Caller, cfg: CheckConfig, spec: RopeSpec, report: Report) -> None:
    """Judge the probe case in ulps too; a result over ``cfg.max_ulps`` is a mismatch.

    ``report.max_ulps`` becomes the largest ulp error of the probe and the drawn examples.
    """
    assert cfg.max_ulps is not None
    case = probe_case(cfg)
    ev = evaluate(call, cfg, spec, case)
    if not ev.ok:  # raised, a malformed result, or out of the tolerance: not a pass
        if report.status == "conformant":
            _probe_failed(report, case, ev)
        return
    ev.judge_ulps(cfg.max_ulps)
    assert ev.max_ulps is not None
    report.max_ulps = max(ev.max_ulps, report.max_ulps or 0.0)
    if ev.ulps_failure is not None and report.status == "conformant":
        report.status = "mismatch"
        report.counterexample = case
        report.worst = ev.ulps_failure


def _probe_failed(report: Report, case: Case, ev: Evaluation) -> None:
    """Mark a conformant `report` failed by the probe case, whose evaluation is `ev`."""
    report.counterexample = case
    report.status = "error" if ev.error is not None or ev.output_error is not None else "mismatch"
    if ev.error is not None:
        report.error = f"the checked function raised {ev.error} (on the probe case)"
    elif ev.output_error is not None:
        report.error = f"{ev.output_error} (on the probe case)"
    else:
        report.diagnosis, report.worst, _ = _diagnose_evaluation(ev)
