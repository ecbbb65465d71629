"""Sphinx extension (listed in ``_config.yml``): fills ``book/results.md`` with the Results page at build time.

The page body is :func:`labmagic.display.results_page.render` over ``results/``; every bench CSV is a dependency of
the page, and the page is rebuilt on every build (new CSVs or a changed chapter can make it stale without touching
``book/results.md``).
"""

from __future__ import annotations

from pathlib import Path

from ..display.results_page import render
from ..store.catalog import csv_paths

RESULTS_DOC = "book/results"


def _on_source_read(app, docname, source):
    if docname != RESULTS_DOC:
        return
    root = Path(app.srcdir)
    for csv in csv_paths(root):
        app.env.note_dependency(str(csv))
    source[0] = source[0].rstrip() + "\n" + render(root, doc_dir=str(Path(RESULTS_DOC).parent))


def _always_outdated(app, env, added, changed, removed):
    return [RESULTS_DOC] if RESULTS_DOC in env.found_docs else []


def setup(app):
    app.connect("source-read", _on_source_read)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
