"""Sphinx extension (listed in ``_config.yml``): fills the generated parts of the Methods pages at build time.

A page under ``book/methods/`` asks for a part with a fenced block, which is replaced by
:func:`labmagic.display.methods_pages.generated` before the page is parsed::

    ```{labmagic-generated} book-roofline
    ```

A block this extension does not replace (the extension not loaded, a typo in the fence) reaches MyST as an unknown
directive, which fails the strict build; a part that cannot be drawn from ``results/`` (a malformed CSV) is an error
in the build log and on the page, as on the Results page. The pages read ``results/``, so they are rebuilt on every
build.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.util import logging

from ..display.markdown import text
from ..display.methods_pages import generated
from ..errors import LabError

METHODS_DIR = "book/methods/"
#: The fenced block a page asks for a generated part with (indented, inside a list item, or not): the part's name
#: (and a chapter, for ``chapter-chart``), then a closing fence.
FENCE = re.compile(r"^([ \t]*)```\{labmagic-generated\}[ \t]+(\S+)(?:[ \t]+(\S+))?[ \t]*\n[ \t]*```[ \t]*$", re.M)

logger = logging.getLogger(__name__)


def _fill(root: Path, docname: str, name: str, argument: str | None) -> str:
    try:
        return generated(name, root, argument)
    except LabError as exc:
        logger.error(str(exc), location=docname)
        return f"\n```{{error}}\nThis part of the page could not be generated: {text(exc)}\n```\n"


def _on_source_read(app, docname, source):
    if not docname.startswith(METHODS_DIR):
        return
    root = Path(app.srcdir)

    def fill(m: re.Match) -> str:
        indent = m.group(1)
        return "\n".join(indent + line if line else line
                         for line in _fill(root, docname, m.group(2), m.group(3)).split("\n"))

    source[0] = FENCE.sub(fill, source[0])


def _always_outdated(app, env, added, changed, removed):
    return [doc for doc in env.found_docs if doc.startswith(METHODS_DIR)]


def setup(app):
    app.connect("source-read", _on_source_read)
    app.connect("env-get-outdated", _always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
