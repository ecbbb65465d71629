"""Sphinx extension for the book: ``%%cuda_kernel`` cells are highlighted as CUDA, not as Python.

A chapter notebook's code cells are all lexed with the notebook's language (Python); CUDA in a ``%%cuda_kernel``
cell then comes out as a stream of error tokens (and Sphinx warns about it, which fails a ``-W`` build). This
switches those cells' lexer to :class:`CudaCellLexer` before the page is written: the magic's own line is read as a
magic (its arguments, such as ``-n '(void(*)(float*))f'``, are not CUDA and would lex as errors), the rest as
Pygments' CUDA, ``#include <lab/...>`` lines included.
"""

from __future__ import annotations

from docutils import nodes
from pygments.lexers.c_like import CudaLexer
from pygments.token import Keyword, Text

#: Cell magics whose body is CUDA C++.
CUDA_MAGICS = ("%%cuda_kernel",)


class CudaCellLexer(CudaLexer):
    """A ``%%cuda_kernel`` cell: the magic and its arguments, then CUDA."""

    name = "CUDA cell"
    aliases = ["cuda-cell"]
    filenames: list[str] = []

    def get_tokens_unprocessed(self, text, stack=("root",)):
        offset = 0
        stripped = text.lstrip()
        if stripped.startswith("%%"):
            start = len(text) - len(stripped)
            end = text.find("\n", start)
            end = len(text) if end < 0 else end + 1
            magic = stripped.split(None, 1)[0]
            if start:
                yield 0, Text, text[:start]
            yield start, Keyword, magic
            if start + len(magic) < end:
                yield start + len(magic), Text, text[start + len(magic) : end]
            offset, text = end, text[end:]
        for index, token, value in super().get_tokens_unprocessed(text, stack):
            yield index + offset, token, value


def _cuda_cells(app, doctree):
    for block in doctree.findall(nodes.literal_block):
        if block.astext().lstrip().startswith(CUDA_MAGICS):
            block["language"] = "cuda-cell"


def setup(app):
    app.add_lexer("cuda-cell", CudaCellLexer)
    app.connect("doctree-read", _cuda_cells)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
