"""Import only a library's RoPE module, without its heavy dependencies.

Several libraries import their whole stack from the package ``__init__`` (litgpt pulls
Lightning, timm torchvision, OLMo-core its checkpoint readers, Gemma etils and Flax's
training kit). `import_alone` registers each parent package as an empty package that only
knows its directory, so importing ``pkg.sub.rope`` runs that file and the files it imports,
nothing else; `fake_modules` stands in for a module that is imported for names the RoPE code
never calls.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["fake_modules", "hide_if_broken", "import_alone", "patched"]


def _not_available(qualname: str) -> Any:
    def placeholder(*args: object, **kwargs: object) -> Any:
        msg = f"{qualname} is a stand-in of `rope-ref survey` and cannot be called"
        raise RuntimeError(msg)

    placeholder.__qualname__ = qualname
    return placeholder


class _FakeModule(types.ModuleType):
    """A module whose every attribute is a stand-in that refuses to be called."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _not_available(f"{self.__name__}.{name}")


class _FakeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a stand-in for every module under the prefixes it was given."""

    def __init__(self) -> None:
        self.prefixes: set[str] = set()

    def find_spec(self, name: str, path: object = None, target: object = None) -> Any:
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _FakeModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_FINDER = _FakeFinder()


def fake_modules(*names: str, installed: bool = False) -> None:
    """Stand in for the packages `names` (and all below them) where they are not installed.

    With ``installed=True`` they are stood in for even when installed (a library's own
    module that imports its training stack); modules already imported are kept.

    Examples
    --------
    >>> from rope_ref.cli.survey._shims import fake_modules
    >>> fake_modules("rope_ref_example_absent")
    >>> import rope_ref_example_absent.sub as m
    >>> m.anything()
    Traceback (most recent call last):
    ...
    RuntimeError: rope_ref_example_absent.sub.anything is a stand-in of `rope-ref survey` ...
    """
    for name in names:
        if installed and name not in sys.modules:
            _FINDER.prefixes.add(name)
            sys.meta_path[:] = [_FINDER, *(f for f in sys.meta_path if f is not _FINDER)]
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                continue
        except (ImportError, ValueError):
            pass
        _FINDER.prefixes.add(name)
    if _FINDER.prefixes and _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def _package_dir(name: str) -> str:
    parent, _, leaf = name.rpartition(".")
    if not parent:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            msg = f"No module named {name!r}"
            raise ModuleNotFoundError(msg)
        return str(next(iter(spec.submodule_search_locations)))
    return os.path.join(str(next(iter(sys.modules[parent].__path__))), leaf)


def import_alone(name: str) -> Any:
    """Import the module `name` without running its parent packages' ``__init__``.

    Parents already imported are kept; the others are registered as empty packages.

    Examples
    --------
    >>> from rope_ref.cli.survey._shims import import_alone
    >>> import_alone("json.decoder").JSONDecodeError.__name__
    'JSONDecodeError'
    """
    parts = name.split(".")
    for i in range(1, len(parts)):
        package = ".".join(parts[:i])
        if package not in sys.modules:
            spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
            spec.submodule_search_locations = [_package_dir(package)]
            sys.modules[package] = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notices of the libraries
        return importlib.import_module(name)


def hide_if_broken(name: str) -> str | None:
    """Make the installed module `name` look absent when importing it fails; say why.

    A CUDA build of torchvision beside a CPU build of PyTorch fails on import (its
    operators do not register), and diffusers, which imports it whenever it is installed,
    fails with it. Marking it absent (``sys.modules[name] = None``) makes
    ``importlib.util.find_spec`` return None, so such libraries take their path without it.

    Examples
    --------
    >>> from rope_ref.cli.survey._shims import hide_if_broken
    >>> hide_if_broken("json") is None
    True
    """
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(name)
    except Exception as err:  # any import-time failure of the broken build
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        sys.modules[name] = None  # type: ignore[assignment]
        return f"{name} does not import ({type(err).__name__}: {err}); hidden"
    return None


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """Set ``owner.name`` to `value` for the duration of the block.

    Examples
    --------
    >>> import math
    >>> from rope_ref.cli.survey._shims import patched
    >>> with patched(math, "tau", 6.0):
    ...     math.tau
    6.0
    >>> round(math.tau, 2)
    6.28
    """
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)
