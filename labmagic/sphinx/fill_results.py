"""Sphinx extension (listed in ``_config.yml``): fills the pages generated from ``results/`` at build time.

- ``book/results.md`` gets the Results page: :func:`labmagic.display.results_page.render` over ``results/``.
- ``book/intro.md``, the front page, gets the book's headline and what each chapter teaches
  (:mod:`labmagic.display.chapters`) between the same markers as the README's generated blocks.

Every bench CSV is a dependency of both pages, and both are rebuilt on every build (new CSVs or a changed chapter can
make them stale without touching their sources).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.util import logging

from ..display import chapters
from ..display.markdown import text
from ..display.results_page import headline_markdown, render
from ..errors import LabError
from ..store.catalog import csv_paths

RESULTS_DOC = "book/results"
INTRO_DOC = "book/intro"

logger = logging.getLogger(__name__)


def _unreadable(exc: LabError, docname: str) -> str:
    """For data that cannot be trusted (a malformed CSV, a truncated chapter): an error in the build log, which fails
    a strict build, and on the page in the table's place, so no table goes missing unsaid."""
    logger.error(str(exc), location=docname)
    return f"\n```{{error}}\nThe results could not be read: {text(exc)}\n```\n"


def _results_body(root: Path) -> str:
    try:
        return render(root, doc_dir=str(Path(RESULTS_DOC).parent))
    except LabError as exc:
        return _unreadable(exc, RESULTS_DOC)


def _intro(root: Path, source: str) -> str:
    """The front page's source with its generated blocks filled (a block whose markers are missing is left out)."""
    try:
        blocks = {(chapters.HEADLINE_BEGIN, chapters.HEADLINE_END): headline_markdown(root, link=True),
                  (chapters.CHAPTERS_BEGIN, chapters.CHAPTERS_END): chapters.chapters_markdown(root, link=True)}
    except LabError as exc:
        blocks = {(chapters.HEADLINE_BEGIN, chapters.HEADLINE_END): _unreadable(exc, INTRO_DOC)}
    for (begin, end), table in blocks.items():
        try:
            source = chapters.with_block(source, begin, end, table)
        except ValueError:
            continue
    return source


def _on_source_read(app, docname, source):
    if docname not in (RESULTS_DOC, INTRO_DOC):
        return
    root = Path(app.srcdir)
    for csv in csv_paths(root):
        app.env.note_dependency(str(csv))
    if docname == RESULTS_DOC:
        source[0] = source[0].rstrip() + "\n" + _results_body(root)
    else:
        source[0] = _intro(root, source[0])


def _always_outdated(app, env, added, changed, removed):
    return [doc for doc in (RESULTS_DOC, INTRO_DOC) if doc in env.found_docs]


def setup(app):
    app.connect("source-read", _on_source_read)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
