"""Importing the callable that `rope-ref check` tests, and describing its exceptions."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rope_ref.cli.check.conventions import TargetError

__all__ = ["UsageError", "describe_exception", "load_target", "parse_target"]


class UsageError(Exception):
    """A problem with how `rope-ref check` was called (exit status 2)."""


def load_target(target: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` (or ``path/to/file.py:FUNCTION``) and return it.

    Raises `UsageError` when the name is malformed or names nothing importable, and
    `TargetError` when importing the module raises.
    """
    module_name, attr = parse_target(target)
    module = _import(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            msg = f"{module_name!r} has no attribute {attr!r}."
            raise UsageError(msg) from None
    if not callable(obj):
        msg = f"{target!r} must name a callable; got {type(obj).__name__}."
        raise UsageError(msg)
    return obj  # type: ignore[no-any-return]


def parse_target(target: str) -> tuple[str, str]:
    """``(MODULE, FUNCTION)`` of ``MODULE:FUNCTION``, or `UsageError`; imports nothing."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        msg = f"TARGET must look like MODULE:FUNCTION (e.g. mypkg.rope:apply); got {target!r}."
        raise UsageError(msg)
    return module_name, attr


def _import(module_name: str) -> Any:
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name)
        if not path.is_file():
            msg = f"no such file: {module_name!r}."
            raise UsageError(msg)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            msg = f"cannot import {module_name!r} as a Python module."
            raise UsageError(msg)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except BaseException as err:  # an exit or an interrupt at import is a failure too
            raise TargetError(err) from err
        return module
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:  # like `python -m`: modules of the current directory are importable
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and module_name.startswith(err.name):
            msg = f"cannot import module {module_name!r}: {err}."
            raise UsageError(msg) from None
        raise TargetError(err) from err
    except BaseException as err:  # an exit or an interrupt at import is a failure too
        raise TargetError(err) from err
    finally:
        if added:
            sys.path.remove(cwd)


def describe_exception(error: BaseException) -> str:
    """``Type: message (file:line in function)`` for the innermost frame of the error."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}{where if frames else ''}"
