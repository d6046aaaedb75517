"""The child process of `rope-ref check`: it imports the target and calls it, nothing more.

Started by `rope_ref.cli.check.supervise.run_supervised` as ``python -m
rope_ref.cli.check.child FD``. It reads from stdin, each as a length-prefixed pickle written
by the checker, a `Job` (the target and how to call it) and then one request a call (a case
and a spec). It writes one JSON object a line on the file descriptor FD: ``import`` and
``imported`` (with the target's keywords) around the import, or ``usage`` or
``import_failed``; then for each request ``call`` and ``return`` around the call of the
target, ``reading`` and ``read`` around reading its results, and one answer: ``result``
(the results as data, see `rope_ref.cli.check.wire`), ``raised``, ``output_error`` or
``timeout``. It computes no oracle and no verdict: the checker does, from its own copy of
the inputs, so nothing the target does in this process can decide its verdict.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
from dataclasses import dataclass
from typing import IO, Any

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check.conventions import Calling, Case

__all__ = ["Job", "main", "read_message", "write_message"]

_LENGTH = struct.Struct(">Q")


@dataclass(frozen=True)
class Job:
    """What the child runs: ``MODULE:FUNCTION`` and how to call it."""

    target: str
    calling: Calling


def write_message(stream: IO[bytes], message: object) -> None:
    """Write `message` on `stream` as a length-prefixed pickle (the checker to its child)."""
    data = pickle.dumps(message)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def read_message(stream: IO[bytes]) -> Any:
    """The next message of `write_message` on `stream`, or None at its end."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    return None if len(data) < size else pickle.loads(data)


class _Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}).encode() + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(self.fd, view) :]


def main(argv: list[str]) -> None:
    """Serve the job and the requests read from stdin, answering on the descriptor ``argv[1]``."""
    channel = _Channel(int(argv[1]))
    requests = os.fdopen(os.dup(0), "rb")
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)  # the target's stdin is empty: the requests are the checker's
    try:
        _serve(read_message(requests), requests, channel)
    except BaseException as err:  # our own failure: reported, never a traceback
        from rope_ref.cli.check.target import describe_exception

        channel.send("crash", message=_safely(describe_exception, err))
    os._exit(0)  # at once: no atexit handler or thread of the target runs after the end


def _serve(job: Job, requests: IO[bytes], channel: _Channel) -> None:
    from rope_ref.cli.check.conventions import (
        TargetError,
        _n_positional,
        spec_keywords,
        takes_seq_len,
    )
    from rope_ref.cli.check.target import UsageError, describe_exception, load_target
    from rope_ref.cli.check.timeout import set_call_monitor

    channel.send("import")
    try:
        fn = load_target(job.target)
    except UsageError as err:
        channel.send("usage", message=str(err))
        return
    except TargetError as err:
        channel.send("import_failed", message=_safely(describe_exception, err.error))
        return
    keywords = [*spec_keywords(fn), *(["seq_len"] if takes_seq_len(fn) else [])]
    channel.send("imported", keywords=keywords, n_positional=_n_positional(fn))
    set_call_monitor(channel.send)
    while (request := read_message(requests)) is not None:
        case, spec = request
        event, fields = _answer(fn, job.calling, case, spec, channel)
        channel.send(event, **fields)


def _answer(
    fn: Any, calling: Calling, case: Case, spec: RopeSpec, channel: _Channel
) -> tuple[str, dict[str, Any]]:
    import warnings

    from rope_ref.cli.check.conventions import OutputError, TargetError, call_target
    from rope_ref.cli.check.target import describe_exception
    from rope_ref.cli.check.timeout import TargetTimeoutError
    from rope_ref.cli.check.wire import encode_results

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the checked code's warnings are not verdicts
            results = call_target(fn, calling, case, spec)
    except TargetError as err:
        return "raised", {"message": _safely(describe_exception, err.error)}
    except OutputError as err:
        return "output_error", {"message": str(err)}
    except TargetTimeoutError as err:
        return "timeout", {"seconds": err.seconds}
    channel.send("reading")  # the results' own code runs here: timed like a call
    try:
        outputs = encode_results(results)
    except BaseException as err:  # a result that cannot be read is the target's fault
        message = f"the result cannot be read: {_safely(describe_exception, err)}"
        return "output_error", {"message": message}
    finally:
        channel.send("read")
    return "result", {"outputs": outputs}


def _safely(describe: Any, err: BaseException) -> str:
    try:
        return str(describe(err))
    except BaseException:  # an exception whose message itself raises
        return type(err).__name__


if __name__ == "__main__":
    main(sys.argv)
