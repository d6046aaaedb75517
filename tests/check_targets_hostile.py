"""Callables for `rope-ref check` that try to decide their own verdict, or to outlive it.

Each returns a wrong result (or none) and attacks the checker from inside the process it
runs in: the oracle's code, the spec it is given, the channel to the checker, the process
tree. A verdict other than a failure is a wrong pass.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from tests.check_targets import _rope


def patches_the_oracle(x, positions):
    """Makes the oracle of this process the identity, then returns x unrotated."""
    import rope_ref.testing._compare as compare
    from rope_ref._engine import api

    def identity(x, *args, **kwargs):
        return x

    vars(compare)["apply_rope"] = identity
    vars(api)["apply_rope"] = identity
    return x.copy()


def mutates_the_spec(x, positions, *, spec):
    """Sets the spec's base to 500 (the oracle once read this object) and rotates with it."""
    object.__setattr__(spec, "base", 500.0)
    return _rope(x, positions, base=500.0)


def forges_the_channel(x, positions):
    """Writes a verdict and unrotated results on the checker's channel, then exits 0.

    The old child reported a pickled `Report`; this one's pickle creates the file named by
    ROPE_REF_TEST_MARKER if anyone unpickles it.
    """
    import base64
    import gc
    import json
    import pathlib
    import pickle

    class Marker:
        def __reduce__(self):
            return (pathlib.Path.touch, (pathlib.Path(os.environ["ROPE_REF_TEST_MARKER"]),))

    jobs = [o for o in gc.get_objects() if type(o).__name__ == "Job"]
    token = getattr(jobs[0], "token", "") if jobs else ""
    fd = int(sys.argv[1])
    data = base64.b64encode(pickle.dumps(Marker())).decode("ascii")
    values = np.asarray(x, dtype=x.dtype)
    import io

    buffer = io.BytesIO()
    np.save(buffer, values)
    npy = base64.b64encode(buffer.getvalue()).decode("ascii")
    shape = list(values.shape)
    result = {"label": "x", "dtype": str(values.dtype), "shape": shape, "npy": npy}
    lines = [
        {"event": "return"},
        {"event": "report", "data": data, "token": token},
        {"event": "result", "outputs": [result]},
    ]
    os.write(fd, b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    os._exit(0)


class LyingArray(np.ndarray):
    """A float64 array whose ``dtype`` says float32."""

    @property
    def dtype(self):
        return np.dtype(np.float32)


def float64_says_float32(x, positions):
    """A float64 result of a float32 input, in an array that claims to be float32."""
    return _rope(x.astype(np.float64), positions).view(LyingArray)


def raises_past_eight_tokens(x, positions):
    """Correct on the drawn cases (at most 8 tokens); raises on the longer probe."""
    if x.shape[-2] > 8:
        msg = "too long"
        raise RuntimeError(msg)
    return _rope(x, positions)


def wrong_shape_past_eight_tokens(x, positions):
    """Correct on the drawn cases (at most 8 tokens); drops a token on the longer probe."""
    y = _rope(x, positions)
    return y[..., 1:, :] if x.shape[-2] > 8 else y


_STARTED: list[int] = []


def starts_a_new_session(x, positions):
    """On its first call, starts a sleeper in a session of its own, one with its environment
    cleared, one that double-forks away, and writes their pids to ROPE_REF_TEST_PIDFILE;
    returns a correct result."""
    if _STARTED:
        return _rope(x, positions)
    _STARTED.append(1)
    sleep = "import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(60)"
    env_free = subprocess.Popen([sys.executable, "-c", sleep], env={}, stdout=subprocess.PIPE)
    detached = subprocess.Popen([sys.executable, "-c", sleep], stdout=subprocess.PIPE)
    double = (
        "import os, subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {sleep!r}], stdout=sys.stdout); "
        "os._exit(0)"
    )
    orphan = subprocess.Popen([sys.executable, "-c", double], stdout=subprocess.PIPE)
    pids = [_first_line(p) for p in (env_free, detached, orphan)]
    with open(os.environ["ROPE_REF_TEST_PIDFILE"], "a") as out:
        out.write("".join(f"{pid}\n" for pid in pids))
    return _rope(x, positions)


def _first_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().decode().strip()


def silences_the_child(x, positions):
    """Makes the child's channel a no-op, then returns a correct result: the checker waits
    for an answer that never comes, while the child waits for the next request."""
    channel = sys.modules["__main__"]._Channel  # the child runs as __main__

    def silent(self, event, **fields):
        return None

    type.__setattr__(channel, "send", silent)
    return _rope(x, positions)
