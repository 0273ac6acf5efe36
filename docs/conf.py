"""Sphinx configuration of the lswmkc-dask documentation.

Build it with ``python -m sphinx -W --keep-going -b html docs OUT`` from the checkout
(``pip install ".[docs]"`` first); the examples gallery runs while it builds.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, installed or not
sys.path.insert(0, str(HERE / "_ext"))

import lswmkc_dask  # noqa: E402

project = "lswmkc-dask"
author = "lswmkc-dask developers"
copyright = "lswmkc-dask developers"  # noqa: A001 (Sphinx's name)
release = lswmkc_dask.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "lswmkc_cli",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json", "auto_examples/*.md5"]

# --- Markdown (MyST): GitHub's heading anchors, so that the same links work on GitHub
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "dollarmath"]

# --- API reference from the docstrings (numpydoc)
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": False}
autodoc_typehints = "none"  # numpydoc's Parameters section gives the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# --- the examples gallery: every script runs while the docs build
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "backreferences_dir": "api/generated/backreferences",
    "doc_module": ("lswmkc_dask",),
    "run_stale_examples": True,  # every build runs every example (CI checks that they run)
}

# --- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"lswmkc-dask {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
html_show_sourcelink = False
html_static_path = ["_static"]
html_css_files = ["wrap.css"]  # long command lines wrap instead of running past the right edge
# `--max-iter` stays two hyphens (no en dash in a copied command); a fence without a
# language (program output) is not highlighted as Python
smartquotes = False
highlight_language = "none"

# --- links to the repository's documents that the site includes: a page links them by
# their path in the repository (so the link works where the Markdown is read as it is),
# and the site links the page that includes them instead
SITE_PAGES = {"benchmarks/README.md": "performance.md", "cluster/README.md": "user-guide/dask-cluster.md"}
MD_LINK = re.compile(r"\]\(([^()\s#]+)(#[^()\s]*)?\)")


def site_link(docname: str, target: str) -> str | None:
    """The link, relative to the page ``docname``, that replaces ``target`` on the site
    (a relative link to a document of :data:`SITE_PAGES`), or None to keep it.
    """
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None
    page_dir = (HERE / docname).parent
    try:
        in_repo = (page_dir / target).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    page = SITE_PAGES.get(in_repo)
    return None if page is None else os.path.relpath(HERE / page, page_dir)


def _rewrite_site_links(app, docname, source):
    def swap(m):
        new = site_link(docname, m.group(1))
        return m.group(0) if new is None else f"]({new}{m.group(2) or ''})"

    source[0] = MD_LINK.sub(swap, source[0])


def setup(app):
    """Rewrite the links to included repository documents (:func:`site_link`)."""
    app.connect("source-read", _rewrite_site_links)
