"""The child process of `rope-ref check`: it imports the target and runs the check.

Started by `rope_ref.testing._supervise.run_supervised` as ``python -m
rope_ref.testing._child FD``. It reads the pickled `Job` from stdin and writes one JSON
object a line on the file descriptor FD: ``import`` and ``imported`` around the import,
``call`` and ``return`` around each call of the target, then exactly one of ``usage``,
``import_failed``, ``crash`` or ``report`` (the pickled `Report` and the job's token), and
exits with status 0 at once. Its stdout and stderr are the target's; nothing the target
prints, closes or exits with can forge a verdict.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pickle
import sys
from dataclasses import dataclass
from typing import Any

from rope_ref.testing._check_cases import CheckConfig

__all__ = ["Job", "main"]


@dataclass(frozen=True)
class Job:
    """What the child checks: ``MODULE:FUNCTION``, the configuration, the reply token."""

    target: str
    config: CheckConfig
    token: str


class _Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}).encode() + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(self.fd, view) :]


def main(argv: list[str]) -> None:
    """Run the job read from stdin, reporting on the descriptor ``argv[1]``."""
    channel = _Channel(int(argv[1]))
    job: Job = pickle.loads(sys.stdin.buffer.read())
    try:
        event, fields = _run(job, channel)
        channel.send(event, **fields)
    except BaseException as err:  # our own failure: reported, never a traceback
        from rope_ref.testing._target import describe_exception

        channel.send("crash", message=describe_exception(err))
    os._exit(0)  # at once: no atexit handler or thread of the target runs after the verdict


def _run(job: Job, channel: _Channel) -> tuple[str, dict[str, str]]:
    from rope_ref.testing._check import check
    from rope_ref.testing._conventions import TargetError, _n_positional, spec_keywords
    from rope_ref.testing._reproducer import reproducer
    from rope_ref.testing._target import UsageError, describe_exception, load_target
    from rope_ref.testing._timeout import set_call_monitor

    channel.send("import")
    try:
        fn = load_target(job.target)
    except UsageError as err:
        return "usage", {"message": str(err)}
    except TargetError as err:
        return "import_failed", {"message": describe_exception(err.error)}
    channel.send("imported")
    set_call_monitor(channel.send)
    report = check(fn, job.config)
    set_call_monitor(None)
    if report.counterexample is not None:
        layout: Any = report.layout
        spec = dataclasses.replace(job.config.spec, layout=layout)
        two_inputs = job.config.calling.convention == "complex" and _n_positional(fn) == 3
        report.reproducer = reproducer(
            job.target, job.config, spec, report.counterexample, spec_keywords(fn), two_inputs
        )
    data = base64.b64encode(pickle.dumps(report)).decode("ascii")
    return "report", {"data": data, "token": job.token}


if __name__ == "__main__":
    main(sys.argv)
