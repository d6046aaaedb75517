"""A config.json read from a path: a file, or a model directory holding one.

Only a regular file is read (a device such as ``/dev/zero``, a FIFO or a socket would
never end, or block), and at most `MAX_CONFIG_BYTES` of it: a config.json is a few
kilobytes. Every refusal is a ValueError naming the path and what is wrong with it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["MAX_CONFIG_BYTES", "read_config"]

#: Largest config.json read. Released configs are a few kilobytes (LongRoPE's factor lists
#: and per-layer overrides included); this leaves room for any and bounds the memory used.
MAX_CONFIG_BYTES = 16 * 2**20


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object in the config.json at `path` (or in ``path/config.json``).

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(json.dumps({"head_dim": 64}))
    >>> read_config(folder)
    {'head_dim': 64}
    >>> read_config(folder / "missing.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `config` path '...missing.json' does not exist.
    """
    name: object = os.fspath(path)
    if not isinstance(name, str):  # a bytes path
        msg = f"`config` path must be a str or os.PathLike of str; got {path!r}."
        raise TypeError(msg)
    file = Path(name)
    if _is_dir(file, name):
        file = file / "config.json"
    shown = str(file)
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never blocks
    except FileNotFoundError:
        if file != Path(name):
            msg = f"`config` directory {name!r} holds no config.json."
        else:
            hint = " (a JSON string? pass json.loads(text))" if name.lstrip()[:1] in "{[" else ""
            msg = f"`config` path {name!r} does not exist{hint}."
        raise ValueError(msg) from None
    except (OSError, ValueError) as err:  # no permission, a name too long, a NUL byte
        msg = f"`config` path {shown!r} cannot be read: {_reason(err)}."
        raise ValueError(msg) from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            msg = (
                f"`config` path {shown!r} is not a regular file (a device, FIFO or socket); "
                "a config.json is a file."
            )
            raise ValueError(msg)
        data = stream.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES or info.st_size > MAX_CONFIG_BYTES:
        size = max(len(data), info.st_size)
        msg = (
            f"`config` file {shown!r} is more than {MAX_CONFIG_BYTES:,} bytes (16 MiB; "
            f"{size:,} or more): too large for a config.json."
        )
        raise ValueError(msg)
    return _parse(data, shown)


def _is_dir(file: Path, name: str) -> bool:
    try:
        return file.is_dir()
    except (OSError, ValueError) as err:
        msg = f"`config` path {name!r} cannot be read: {_reason(err)}."
        raise ValueError(msg) from None


def _reason(err: Exception) -> str:
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err)


def _parse(data: bytes, shown: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        msg = f"`config` file {shown!r} is not UTF-8 text (byte {err.start}); a config.json is."
        raise ValueError(msg) from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        msg = f"`config` file {shown!r} is not valid JSON ({err})."
        raise ValueError(msg) from None
    except RecursionError:
        msg = f"`config` file {shown!r} is nested too deeply."
        raise ValueError(msg) from None
    if not isinstance(config, dict):
        msg = f"`config` file {shown!r} must hold a JSON object; got {type(config).__name__}."
        raise ValueError(msg)
    return config
