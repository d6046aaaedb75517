"""Running the second probe's cases: one child forked per case, classified, and the report.

`run_all` forks a child per case (numpy, torch, jax and rope_ref are imported once, before),
under `TIMEOUT_S` and an address-space cap of what it inherits plus `MEMORY_HEADROOM`;
`_classify` runs the call in the child and sorts the outcome into ``error-ok``, ``value-ok``,
``crash``, ``hang``, ``leak`` or ``wrong`` (see ``second_probe.py``); `report` prints the counts
and every finding.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import Counter, defaultdict
from typing import Any

import dask
import jax
import numpy as np
import torch
from _expect import _INPUTS, TIMEOUT_S, Case, _raw

MEMORY_HEADROOM = 6 << 30  # bytes of address space a child may add to what it inherits


def _state() -> dict[str, Any]:
    """The global state no call may change."""
    return {
        "numpy errstate": np.geterr(),
        "numpy print options": repr(np.get_printoptions()),
        "numpy legacy random": np.random.get_state(legacy=False)["state"]["key"].tobytes(),  # noqa: NPY002
        "random": random.getstate(),
        "jax_enable_x64": jax.config.read("jax_enable_x64"),
        "torch default dtype": torch.get_default_dtype(),
        "torch threads": torch.get_num_threads(),
        "torch grad mode": torch.is_grad_enabled(),
        "torch rng": torch.random.get_rng_state().numpy().tobytes(),
        "warnings filters": list(warnings.filters),
        "os.environ": dict(os.environ),
        "sys.stdout/stderr": (sys.stdout, sys.stderr),
        "sys.path": list(sys.path),
        "cwd": os.getcwd(),
        "signal handlers": [
            signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM)
        ],
        "threads": sorted(t.name for t in threading.enumerate()),
    }


def _classify(c: Case) -> tuple[str, str]:
    """Run case `c` here (in the child): its category and a note."""
    _INPUTS.clear()
    before = _state()
    try:
        result = c.call()
    except AssertionError as e:
        outcome = (
            ("error-ok", "AssertionError")
            if c.expect.param == "AssertionError"
            else ("crash", f"AssertionError: {e}")
        )
    except (TypeError, ValueError) as e:
        msg = f"{type(e).__name__}: {e}"
        p, got = c.expect.param, c.expect.got
        if p is None or p == "AssertionError":
            outcome = ("wrong", f"an error where a value was due: {msg}")
        elif p not in str(e):
            outcome = ("wrong", f"message does not name `{p}`: {msg}")
        elif got is not None and got not in str(e):
            outcome = ("wrong", f"message does not show the value {got!r}: {msg}")
        else:
            outcome = ("error-ok", msg)
    except MemoryError as e:
        outcome = ("crash", f"MemoryError {e}")
    except BaseException as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        outcome = (
            "crash",
            f"{type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})",
        )
    else:
        if c.expect.check is None:
            outcome = (
                "wrong",
                f"returned {type(result).__name__} where an error naming "
                f"`{c.expect.param}` was due: {result!r:.200}",
            )
        else:
            try:
                c.expect.check(result, [f for _, _, f in _INPUTS])
                outcome = (c.expect.passing, "")
            except Exception as e:
                outcome = ("wrong", f"{type(e).__name__}: {e}")
    after = _state()
    for key, value in before.items():
        if key == "random" and c.func.startswith("testing.strategies"):
            continue  # Hypothesis's own .example() draws from the global random
        if after[key] != value:
            return "leak", f"{key} changed: {value!r:.120} -> {after[key]!r:.120}; {outcome[1]}"
    for k, (obj, raw, _) in enumerate(_INPUTS):
        if raw is not None and _raw(obj) != raw:
            return "leak", f"input {k} ({type(obj).__name__}) was changed; {outcome[1]}"
    return outcome


def _child(c: Case, fd: int) -> None:
    try:
        with open("/proc/self/status") as status:
            vm = int(status.read().split("VmSize:")[1].split()[0]) * 1024
        limit = vm + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        warnings.simplefilter("ignore")  # a call's warnings are not findings; changing filters is
        with (
            open(os.devnull, "w") as null,
            contextlib.redirect_stdout(null),
            contextlib.redirect_stderr(null),
        ):
            outcome = _classify(c)
    except BaseException as e:
        outcome = ("crash", f"in the probe: {type(e).__name__}: {e}")
    os.write(fd, json.dumps(outcome).encode())
    os._exit(0)


def run_all(cases: list[Case], jobs: int) -> list[tuple[Case, str, str, float]]:
    """Run `cases`, `jobs` children at a time: (case, category, note, seconds) each."""
    dask.config.set(scheduler="synchronous")  # no thread pool left behind by the probe itself
    pending = list(cases)
    running: dict[int, tuple[Case, int, float, bytearray]] = {}
    done: list[tuple[Case, str, str, float]] = []
    import sympy  # type: ignore[import-untyped]  # noqa: F401  (its warning filter is not a call's doing)
    import torch._dynamo  # noqa: F401
    import transformers  # noqa: F401

    while pending or running:
        while pending and len(running) < jobs:
            c = pending.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(c, w)
            os.close(w)
            running[pid] = (c, r, time.monotonic(), bytearray())
        fds = {r: pid for pid, (_, r, _, _) in running.items()}
        ready, _, _ = select.select(list(fds), [], [], 0.2)
        for r in ready:
            chunk = os.read(r, 1 << 16)
            running[fds[r]][3].extend(chunk)
        for pid, (c, r, t0, buf) in list(running.items()):
            elapsed = time.monotonic() - t0
            waited, status = os.waitpid(pid, os.WNOHANG)
            if waited == 0 and elapsed < TIMEOUT_S:
                continue
            if waited == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                cat, note = "hang", f"no answer in {TIMEOUT_S:.0f} s"
            else:
                while chunk := os.read(r, 1 << 16):
                    buf.extend(chunk)
                if buf:
                    cat, note = json.loads(buf)
                else:
                    sig = -os.waitstatus_to_exitcode(status)
                    cat, note = (
                        "crash",
                        "child ended without a verdict "
                        f"(signal {signal.Signals(sig).name if sig > 0 else 'none'})",
                    )
            os.close(r)
            del running[pid]
            done.append((c, cat, note, elapsed))
            say(
                f"{cat:9} {c.func}: {c.name}"
                + (f"\n          {note}" if cat not in ("error-ok", "value-ok") else "")
            )
    return done


def say(text: str = "") -> None:
    """Write a line to stdout."""
    sys.stdout.write(f"{text}\n")
    sys.stdout.flush()


CATEGORIES = ("error-ok", "value-ok", "crash", "hang", "leak", "wrong")


def report(done: list[tuple[Case, str, str, float]]) -> None:
    """Counts by category and by function, then every finding."""
    by_cat = Counter(cat for _, cat, _, _ in done)
    by_func: dict[str, Counter[str]] = defaultdict(Counter)
    for c, cat, _, _ in done:
        by_func[c.func][cat] += 1
    say(f"\n{len(done)} cases: " + ", ".join(f"{k} {by_cat[k]}" for k in CATEGORIES))
    width = max(len(f) for f in by_func)
    say(f"\n{'function':{width}} " + " ".join(f"{k:>8}" for k in CATEGORIES))
    for func in sorted(by_func):
        say(f"{func:{width}} " + " ".join(f"{by_func[func][k]:8}" for k in CATEGORIES))
    findings = [(c, cat, note) for c, cat, note, _ in done if cat not in ("error-ok", "value-ok")]
    say(f"\n{len(findings)} findings")
    for c, cat, note in findings:
        say(f"- [{cat}] {c.func}: {c.name}\n    {note}")
