"""Sphinx extension for the book: ``%%cuda_kernel`` cells are highlighted as CUDA, not as Python.

A chapter notebook's code cells are all lexed with the notebook's language (Python); CUDA in a ``%%cuda_kernel``
cell then comes out as a stream of error tokens (and Sphinx warns about it, which fails a ``-W`` build). This
switches those cells' lexer to Pygments' ``cuda`` before the page is written.
"""

from __future__ import annotations

from docutils import nodes

#: Cell magics whose body is CUDA C++.
CUDA_MAGICS = ("%%cuda_kernel",)


def _cuda_cells(app, doctree):
    for block in doctree.findall(nodes.literal_block):
        if block.astext().lstrip().startswith(CUDA_MAGICS):
            block["language"] = "cuda"


def setup(app):
    app.connect("doctree-read", _cuda_cells)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
