"""Cosmic Ray's test command: run, in the fork server, the tests that execute the mutant.

Usage: ``python run_tests.py SOCKET MAP MODULE -- PYTEST_ARGS...``

MAP is the JSON written by a map run of the fork server (``MAP.src`` beside it holds the
module's source as it was then), or ``-`` to run PYTEST_ARGS unchanged. The mutated
statement is found by comparing MODULE with ``MAP.src``:

- a statement executed at import or collection gets every test of PYTEST_ARGS;
- otherwise only the tests that executed it run (a test that never executes the mutated
  statement cannot see it, the idea behind mutmut's and Stryker's test selection);
- a statement no test executes survives at once (exit 0).

Every way this selection can go wrong makes a mutant survive, never a kill: survivors are
run again on every test. A failure of this script itself exits 0 (a survivor) and is
logged to ``mutation-errors.log`` beside MAP. The environment variable ``MUTATION_MAP_OUT``
turns the run into a map run writing that file.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import sys
from pathlib import Path

OPTIONS = ["-x", "-q", "-p", "no:cacheprovider"]
PASSED_ON = ("CI", "ROPE_REF_XP", "ROPE_REF_HYPOTHESIS_PROFILE")


def changed_lines(before: str, after: str) -> set[int]:
    """Line numbers of ``before`` that differ in ``after`` (1-based)."""
    lines: set[int] = set()
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return lines


def select(map_path: str, module: str, args: list[str]) -> list[str] | None:
    """The pytest arguments for the mutant now in ``module``; None: no test executes it."""
    if map_path == "-":
        return args
    before = Path(map_path + ".src").read_text()
    after = Path(module).read_text()
    if after == before:
        return args
    from coverage.parser import PythonParser

    parser = PythonParser(text=before)
    parser.parse_source()
    executed = json.loads(Path(map_path).read_text())["lines"]
    tests: set[str] = set()
    for line in changed_lines(before, after):
        ids = {*executed.get(str(parser.first_line(line)), ()), *executed.get(str(line), ())}
        if "" in ids:
            return args
        tests |= ids
    return sorted(tests) or None


def run(sock: str, module: str, argv: list[str]) -> int:
    """Send one pytest run to the fork server; its exit status."""
    mapping = os.environ.get("MUTATION_MAP_OUT")
    options = [o for o in OPTIONS if o != "-x"] if mapping else OPTIONS
    request = {
        "argv": options + argv,
        "env": {k: v for k, v in os.environ.items() if k in PASSED_ON},
        "timeout": 600,
        "verbose": bool(os.environ.get("MUTATION_VERBOSE")),
        "map": {"module": module, "out": mapping} if mapping else None,
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(sock)
        conn.sendall((json.dumps(request) + "\n").encode())
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(100)
            if not chunk:
                msg = "the fork server closed the connection"
                raise ConnectionError(msg)
            reply += chunk
    return int(reply)


def main(argv: list[str]) -> int:
    """Exit status for Cosmic Ray: 0 the mutant survived, anything else killed it."""
    sock, map_path, module = argv[:3]
    args = argv[argv.index("--") + 1 :]
    try:
        selected = select(map_path, module, args)
        if selected is None:
            return 0
        status = run(sock, module, selected)
        if status in (4, 5) and selected is not args:  # a selected id was not found
            status = run(sock, module, args)
    except Exception as error:  # the harness failing is never a kill
        log = Path(map_path).parent / "mutation-errors.log"
        with log.open("a") as out:
            out.write(f"{module}: {error!r}\n")
        return 0
    return status if 0 <= status < 256 else 5


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
