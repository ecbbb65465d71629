"""Sphinx extension (listed in ``_config.yml``): fills ``book/results.md`` with the Results page at build time.

The page body is :func:`labmagic.display.results_page.render` over ``results/``; every bench CSV is a dependency of
the page, and the page is rebuilt on every build (new CSVs or a changed chapter can make it stale without touching
``book/results.md``).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.util import logging

from ..display.markdown import text
from ..display.results_page import render
from ..errors import LabError
from ..store.catalog import csv_paths

RESULTS_DOC = "book/results"

logger = logging.getLogger(__name__)


def _body(root: Path) -> str:
    """The page's generated body; for data that cannot be trusted (a malformed CSV, a truncated chapter), an error
    in the build log, which fails a strict build, and on the page in its place, so no table goes missing unsaid."""
    try:
        return render(root, doc_dir=str(Path(RESULTS_DOC).parent))
    except LabError as exc:
        logger.error(str(exc), location=RESULTS_DOC)
        return f"\n```{{error}}\nThe results could not be read: {text(exc)}\n```\n"


def _on_source_read(app, docname, source):
    if docname != RESULTS_DOC:
        return
    root = Path(app.srcdir)
    for csv in csv_paths(root):
        app.env.note_dependency(str(csv))
    source[0] = source[0].rstrip() + "\n" + _body(root)


def _always_outdated(app, env, added, changed, removed):
    return [RESULTS_DOC] if RESULTS_DOC in env.found_docs else []


def setup(app):
    app.connect("source-read", _on_source_read)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
