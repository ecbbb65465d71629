"""Sphinx extension (listed in ``_config.yml``): publish this machine's executed chapters in place of the book's.

``labmagic book --executed`` names, in ``LABMAGIC_EXECUTED`` (a JSON object, page -> executed notebook), the chapters
whose run on this machine it found (:func:`labmagic.cli.book.executed_chapters`); their pages then show that run's
outputs instead of the stored outputs in ``book/``. Nothing is executed, and the sources in ``book/`` are not touched:
the notebook's text is swapped as Sphinx reads the page, without papermill's run metadata (which holds the paths of
the machine that ran it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..cli.book import EXECUTED_ENV
from ..execute.papermill_run import without_run_metadata


def executed_pages() -> dict[str, str]:
    try:
        pages = json.loads(os.environ.get(EXECUTED_ENV) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in pages.items()} if isinstance(pages, dict) else {}


def _on_source_read(app, docname, source):
    path = executed_pages().get(docname)
    if path:
        nb = without_run_metadata(json.loads(Path(path).read_text(encoding="utf-8")))
        source[0] = json.dumps(nb, indent=1, ensure_ascii=False)


def setup(app):
    app.connect("source-read", _on_source_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
