"""Markdown for the book's generated pages and the README: tables, and values from ``results/`` made inert text.

Every value read from a CSV, a manifest or a file name is untrusted (CSVs come from other machines and pull
requests). :func:`text` is the one place that turns such a value into Markdown: the characters that are syntax in
HTML, CommonMark, GitHub's Markdown or MyST (tags, roles, directives, links, emphasis, math, table pipes) become
character references, which every Markdown parser decodes back to the same characters *as text*, and newlines
become spaces, so no value can open a block. Markdown this package writes itself is marked :class:`Markup`.
"""

from __future__ import annotations

import re


class Markup(str):
    """Markdown written by this package (a role, emphasis), not data: :func:`text` and :func:`md_table` keep it."""


#: Syntax anywhere in a line: HTML tags and entities, roles and substitutions, code spans, links and images, emphasis,
#: strikethrough, dollar math, table pipes, and the backslash that would escape our own references.
_INLINE = {c: f"&#{ord(c)};" for c in "&<>\"'`{}[]*~$|\\"}
#: A value never starts a line here (newlines are gone, and callers put it after other text); should one ever do,
#: these would open a heading, a colon-fence directive or a MyST target, so they are encoded there too.
_LEADING = "#:("
#: An underscore between two letters or digits cannot open or close emphasis (``cuda_float4`` stays as it is).
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def text(value) -> str:
    """``value`` as Markdown that renders as exactly its text, on one line; :class:`Markup` passes unchanged."""
    if isinstance(value, Markup):
        return value
    flat = " ".join(str(value).splitlines())  # splitlines knows every line break: \r, \v, \f, \x85, \u2028...
    safe = _LONE_UNDERSCORE.sub("&#95;", "".join(_INLINE.get(c, c) for c in flat))
    if safe and safe[0] in _LEADING:
        safe = f"&#{ord(safe[0])};{safe[1:]}"
    return safe


def md_table(headers: list, rows: list[list]) -> str:
    """A pipe table; every header and cell goes through :func:`text`."""
    lines = ["| " + " | ".join(text(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(text(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
