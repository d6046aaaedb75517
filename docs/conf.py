"""Sphinx configuration for the rope_ref documentation.

Build (warnings are errors)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

Figures and generated tables are made by ``figures/make_figures.py`` when the builder
starts, into ``_static/figures/``; autosummary stubs go to ``generated/``. Both folders are
gitignored and rebuilt on every build.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

DOCS = Path(__file__).resolve().parent
FIGURES = DOCS / "_static" / "figures"

# Stubs of names that left rope_ref.__all__ would linger and warn: regenerate them all.
shutil.rmtree(DOCS / "generated", ignore_errors=True)

try:
    import rope_ref
except ImportError:  # not installed: document the working tree
    sys.path.insert(0, str(DOCS.parent))
    import rope_ref

# -- Project -------------------------------------------------------------------------------

project = "rope_ref"
author = "rope_ref contributors"
copyright = "rope_ref contributors"
release = rope_ref.__version__
version = ".".join(release.split(".")[:2])

# -- General -------------------------------------------------------------------------------

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "figures", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
# In docstrings, `name` links to the object when it exists and is emphasised otherwise.
default_role = "autolink"

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc sections already give the types

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- HTML ----------------------------------------------------------------------------------

html_theme = "alabaster"
html_title = f"rope_ref {release}"
html_theme_options = {
    "description": "Reference RoPE engine on the Python array API",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "230px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}

# -- Generated content ---------------------------------------------------------------------


def _make_figures() -> None:
    """Run ``figures/make_figures.py`` so that every figure and table comes from code."""
    spec = importlib.util.spec_from_file_location("make_figures",
                                                  DOCS / "figures" / "make_figures.py")
    if spec is None or spec.loader is None:
        msg = "cannot load docs/figures/make_figures.py"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(FIGURES)


def _check_api_coverage(app: object) -> None:
    """Warn (an error under -W) when a public name of rope_ref is missing from api.md."""
    from sphinx.util import logging

    text = (DOCS / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", text, flags=re.MULTILINE))
    public = {name for name in rope_ref.__all__ if not name.startswith("__")}
    missing = sorted(public - listed)
    if missing:
        logging.getLogger(__name__).warning(
            "api.md does not list these names of rope_ref.__all__: %s", ", ".join(missing),
            location="api")


def _protocol_signature(app: object, what: str, name: str, obj: object, options: object,
                        signature: str | None, return_annotation: str | None,
                        ) -> tuple[str, str | None] | None:
    """Drop the meaningless ``(*args, **kwargs)`` signature of Protocol classes."""
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", return_annotation
    return None


class _DropMystConfigDump(logging.Filter):
    """myst-parser logs its whole parser configuration at every build: noise for readers."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "myst v" not in str(record.msg)[:40]  # the text may be wrapped in colour codes


def _builder_inited(app: object) -> None:
    _make_figures()
    _check_api_coverage(app)


def setup(app: object) -> dict[str, object]:
    """Generate figures before the sources are read; tidy Protocol signatures."""
    logging.getLogger("sphinx.myst_parser.sphinx_ext.main").addFilter(_DropMystConfigDump())
    app.connect("builder-inited", _builder_inited)  # type: ignore[attr-defined]
    app.connect("autodoc-process-signature", _protocol_signature)  # type: ignore[attr-defined]
    return {"parallel_read_safe": True}
