"""Run pytest in forked children of one process that has imported the heavy dependencies.

Usage: ``python forkserver.py ROOT SOCKET``

Importing torch, transformers and JAX takes seconds; a mutation run starts pytest once per
mutant. This server imports them once and then serves requests on the Unix socket SOCKET:
one JSON line ``{"argv": [...], "env": {...}, "timeout": seconds, "verbose": bool,
"map": null | {"module": PATH, "out": PATH}}``, answered by the exit status of a forked
child that runs ``pytest.main(argv)`` in ROOT. The child first drops every module of
rope_ref, backends and the tests, so they are imported afresh from ROOT, where Cosmic Ray
has written the mutant. No module of rope_ref is ever imported by the server itself.

With ``"map"`` the child records, with coverage.py, which test executed which line of
``module`` (context ``""``: executed at import or collection) and writes
``{"rc": ..., "lines": {line: [test ids]}}`` to ``out``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import sys
from typing import Any

import pytest

HEAVY = (
    "numpy", "scipy", "mpmath", "hypothesis", "pytest", "numba", "ml_dtypes",
    "array_api_strict", "array_api_compat", "dask.array", "torch", "transformers",
    "jax", "jax.numpy", "coverage", "_pytest.doctest", "_pytest.python",
)  # fmt: skip
FRESH = ("rope_ref", "backends", "tests", "conftest")


def _preimport() -> None:
    """Import what every child would otherwise import again (no JAX backend is created)."""
    import importlib

    for name in HEAVY:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _line_map(cov: Any) -> dict[str, list[str]]:
    """Line number -> ids of the tests that executed it, from coverage's contexts."""
    data = cov.get_data()
    lines: dict[str, set[str]] = {}
    for path in data.measured_files():
        for line, contexts in data.contexts_by_lineno(path).items():
            lines.setdefault(str(line), set()).update(contexts)
    return {line: sorted(ids) for line, ids in lines.items()}


class ExitAtSessionFinish:
    """Exit with the session's status as soon as it is known.

    pytest's own ending collects garbage several times over a heap holding torch and
    transformers, which costs a second per run; a forked child has nothing to clean up.
    """

    @staticmethod
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(exitstatus: int) -> None:
        """Leave the process with ``exitstatus``."""
        os._exit(int(exitstatus))


def _child(root: str, request: dict[str, Any]) -> None:
    """Run one pytest in this (forked) process and exit with its status."""
    os.chdir(root)
    os.environ.update(request.get("env", {}))
    for name in list(sys.modules):
        if name.split(".")[0] in FRESH:
            del sys.modules[name]
    sys.path[:] = [root, *(p for p in sys.path if p not in ("", root))]
    signal.alarm(int(request.get("timeout", 600)))
    if not request.get("verbose"):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    # Rewriting asserts only improves failure messages; it costs a second per run, as does
    # anyio's plugin, which no test uses. The server imported pytest's plugins before
    # pytest could mark them for rewriting.
    argv = ["--assert=plain", "-p", "no:anyio", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    argv += request["argv"]
    mapping = request.get("map")
    plugins: list[object] = []
    if not mapping:
        plugins.append(ExitAtSessionFinish())
    cov = None
    if mapping:
        import coverage

        cov = coverage.Coverage(data_file=None, include=[os.path.join(root, mapping["module"])])

        class Contexts:
            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
                cov.switch_context(item.nodeid)
                try:
                    return (yield)
                finally:
                    cov.switch_context("")

        plugins.append(Contexts())
        cov.start()
    try:
        status = int(pytest.main(argv, plugins=plugins))
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # reported as pytest's internal error
        status = 3
    if cov is not None:
        cov.stop()
        with open(mapping["out"], "w") as out:
            json.dump({"rc": status, "lines": _line_map(cov)}, out)
    os._exit(status)


def _wait(pid: int, conn: socket.socket) -> int:
    """The child's exit status; the child is killed if the client goes away (its timeout)."""
    conn.settimeout(0.2)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        try:
            if conn.recv(1) == b"":
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return -9
        except TimeoutError:
            pass


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


def main(root: str, socket_path: str) -> None:
    """Serve requests on ``socket_path`` forever."""
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    _preimport()
    gc.collect()
    gc.freeze()  # the children's collections then skip everything imported here
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    server.bind(socket_path)
    server.listen(4)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = server.accept()
        request = json.loads(_read_line(conn))
        pid = os.fork()
        if pid == 0:
            server.close()
            conn.close()
            _child(os.path.abspath(root), request)
        status = _wait(pid, conn)
        try:
            conn.sendall(f"{status}\n".encode())
            conn.close()
        except OSError:
            pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
