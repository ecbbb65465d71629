"""``%%cuda_kernel`` cells on the site (issue #48): highlighted as CUDA, ``#include <lab/...>`` lines and a magic
line with quoted casts included, with no lexing error (a real Sphinx build with warnings as errors)."""

from __future__ import annotations

import html

import pytest
from pygments.token import Comment, Error

pytest.importorskip("sphinx.cmd.build", reason="Sphinx comes with the book extra (the GPU host's image has none)")

from sphinx.cmd.build import build_main  # noqa: E402

from labmagic.sphinx.cuda_cells import CudaCellLexer  # noqa: E402

CELL = """\
%%cuda_kernel --as fills -n '(void(*)(float*))fill' -n 'tile<float, 4>' -- -I include
#include <lab/sample.cuh>
#include "lab/other.cuh"
__global__ void fill(float* x) { x[threadIdx.x] = 1.5f; }  // it's a comment
"""


def test_the_cell_lexer_reads_the_magic_line_and_the_includes_without_errors():
    tokens = list(CudaCellLexer().get_tokens(CELL))
    assert "".join(value for _, value in tokens) == CELL
    assert not [value for token, value in tokens if token in Error]
    assert [value for token, value in tokens if token is Comment.PreprocFile] == ["<lab/sample.cuh>",
                                                                                  '"lab/other.cuh"']
    assert tokens[0][1] == "%%cuda_kernel"


def test_a_site_page_highlights_the_cell_as_cuda_with_warnings_as_errors(tmp_path):
    source, out = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    (source / "conf.py").write_text('extensions = ["labmagic.sphinx.cuda_cells"]\n')
    body = "\n".join("   " + line for line in CELL.splitlines())
    (source / "index.rst").write_text(f"A chapter\n=========\n\n.. code-block:: ipython3\n\n{body}\n")
    assert build_main(["-W", "-q", "-b", "html", str(source), str(out)]) == 0
    page = html.unescape((out / "index.html").read_text())
    assert 'class="highlight-cuda-cell' in page
    assert '<span class="cpf"><lab/sample.cuh></span>' in page and 'class="err"' not in page
