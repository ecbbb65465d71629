"""``%%cuda_kernel`` cells are highlighted as CUDA C++ in a real JupyterLab, by the extension the package ships
(labmagic/labextension/, built from labextension/): a ``//`` comment is styled as a comment even with an
apostrophe in it, CUDA's qualifiers and C++'s types are coloured, a plain cell stays Python, and the cell follows
its magic line through edits, new cells and the notebook widget's own resets on a kernel change."""

from __future__ import annotations

import json

import nbformat
import pytest

pytestmark = pytest.mark.slow

CUDA_SOURCE = """%%cuda_kernel -n 'k'
// comment with an apostrophe's
extern "C" __global__ void k(const float* x) {}
"""
PYTHON_SOURCE = """# python comment
def f(x):
    return 'it' + str(x)
"""
NOTEBOOK = "cuda_highlight.ipynb"

#: Helpers over the current notebook: its panel, a cell's model and the colours of its highlighted tokens.
HELPERS = """window.labmagicTest = {
  panel: () => window.jupyterapp.shell.currentWidget,
  cell: i => window.labmagicTest.panel().content.widgets[i],
  mime: i => window.labmagicTest.cell(i).model.mimeType,
  // Appends a code cell with `source` to the notebook's model; its index.
  append: source => {
    const m = window.labmagicTest.panel().content.model.sharedModel;
    m.insertCell(m.cells.length, {cell_type: 'code', source});
    return m.cells.length - 1;
  },
  // The mimetypes of the code cells with the magic line, and of those without (each is expected to be one value).
  mimes: () => {
    const cuda = new Set(), other = new Set();
    for (const w of window.labmagicTest.panel().content.widgets) {
      if (w.model.type !== 'code') continue;
      (/^%%cuda_kernel(\\s|$)/.test(w.model.sharedModel.getSource()) ? cuda : other).add(w.model.mimeType);
    }
    return {cuda: [...cuda], other: [...other]};
  },
  // The innermost element holding exactly `text` in cell i's editor, with its colour, and the editor's text colour.
  token: (i, text) => {
    const content = window.labmagicTest.cell(i).node.querySelector('.cm-content');
    if (!content) return null;
    const spans = [...content.querySelectorAll('span')].filter(s => s.textContent === text);
    const span = spans.find(s => ![...s.querySelectorAll('span')].some(c => c.textContent === text)) || null;
    return {found: !!span, color: span && getComputedStyle(span).color, text: getComputedStyle(content).color};
  },
};
true"""


@pytest.fixture(scope="module")
def notebook(lab):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3}}}
    nb.cells = [nbformat.v4.new_code_cell(CUDA_SOURCE), nbformat.v4.new_code_cell(PYTHON_SOURCE)]
    nbformat.write(nb, lab.root / NOTEBOOK)  # a saved notebook, as a reader opens a chapter
    assert lab.page.evaluate(HELPERS)
    assert lab.page.evaluate("window.jupyterapp.hasPlugin('labmagic-jupyterlab:cuda-highlight')"), (
        "labmagic's JupyterLab extension is not installed in this environment: `jupyter labextension list` must "
        "show labmagic-jupyterlab (reinstall with pip install -e .)")
    lab.open_notebook(NOTEBOOK)
    # The kernel's description of itself lands in the metadata whenever the kernel is up, and the notebook widget
    # then resets every cell's language, briefly, until the extension undoes it: let that happen before the tests.
    lab.wait("(async () => { const s = labmagicTest.panel().sessionContext; await s.ready;"
             " await s.session.kernel.info; return true; })()", what="the notebook's kernel to start")
    # The CUDA language loads on demand: wait for its comment token, and for Python's in the other cell.
    lab.wait("labmagicTest.token(0, \"// comment with an apostrophe's\")?.found"
             " && labmagicTest.token(1, '# python comment')?.found", what="both cells to be highlighted")
    return lab


def _token(lab, cell: int, text: str) -> dict:
    token = lab.page.evaluate(f"labmagicTest.token({cell}, {json.dumps(text)})")
    assert token and token["found"], f"no highlighted token {text!r} in cell {cell}"
    return token


def test_a_cuda_comment_is_styled_as_a_comment_apostrophe_and_all(notebook):
    cuda = _token(notebook, 0, "// comment with an apostrophe's")
    python = _token(notebook, 1, "# python comment")
    print(f"comment colours: CUDA {cuda['color']}, Python {python['color']}, text {cuda['text']}")
    assert cuda["color"] == python["color"] != cuda["text"]
    # The apostrophe opened no string: the next line is code, its string literal a string.
    assert _token(notebook, 0, '"C"')["color"] == _token(notebook, 1, "'it'")["color"]
    assert notebook.page.evaluate("labmagicTest.mime(0)") == "text/x-cuda"


def test_cuda_qualifiers_keywords_and_types_are_coloured(notebook):
    colours = {word: _token(notebook, 0, word) for word in ("extern", "__global__", "void", "const", "float")}
    print("CUDA cell colours:", {word: t["color"] for word, t in colours.items()})
    text = colours["void"]["text"]
    assert all(t["color"] != text for t in colours.values()), colours
    keyword = _token(notebook, 1, "def")["color"]  # Python's keyword colour: the theme's
    assert colours["__global__"]["color"] == colours["extern"]["color"] == colours["const"]["color"] == keyword


def test_the_python_cell_is_still_python(notebook):
    assert notebook.page.evaluate("labmagicTest.mime(1)") == notebook.page.evaluate(
        "labmagicTest.panel().content.codeMimetype") == "text/x-ipython"
    assert _token(notebook, 1, "def")["color"] != _token(notebook, 1, "def")["text"]
    assert _token(notebook, 1, "'it'")["color"] != _token(notebook, 1, "def")["color"]
    shot = notebook.screenshot("jupyterlab_cuda_highlighting.png")
    if shot:
        print(f"screenshot: {shot}")


def test_the_cell_follows_its_magic_line(notebook):
    lab = notebook
    body = CUDA_SOURCE.split("\n", 1)[1]
    lab.page.evaluate(f"labmagicTest.cell(0).model.sharedModel.setSource({json.dumps(body)}); true")
    lab.wait("labmagicTest.mime(0) === 'text/x-ipython'", what="the cell without its magic to be Python again")
    lab.page.evaluate(f"labmagicTest.cell(0).model.sharedModel.setSource({json.dumps(CUDA_SOURCE)}); true")
    lab.wait("labmagicTest.mime(0) === 'text/x-cuda'", what="the cell with its magic back to be CUDA")


def test_a_new_cell_with_the_magic_is_cuda(notebook):
    lab = notebook
    source = "%%cuda_kernel\n// a new cell's kernel\n"
    i = lab.page.evaluate(f"labmagicTest.append({json.dumps(source)})")
    lab.wait(f"labmagicTest.panel().content.widgets.length === {i + 1} && labmagicTest.mime({i}) === 'text/x-cuda'"
             f" && labmagicTest.token({i}, \"// a new cell's kernel\")?.found", what="the new cell to be CUDA")
    assert _token(lab, i, "// a new cell's kernel")["color"] == _token(lab, 1, "# python comment")["color"]


def test_cuda_survives_the_notebooks_reset_on_a_kernel_change(notebook):
    """New ``language_info`` (what a kernel change brings) makes the notebook widget set every code cell's
    mimetype to the kernel's language; the CUDA cells go back to CUDA, the Python cell stays Python."""
    lab = notebook
    # Besides the loaded CUDA cell, one added now (its watcher connects later): this test adds its own, so that it
    # does not depend on test_a_new_cell_with_the_magic_is_cuda having run before it (-k runs it alone).
    added = lab.page.evaluate(f"labmagicTest.append({json.dumps('%%cuda_kernel' + chr(10) + '// added')})")
    all_right = "(m => m.cuda.length === 1 && m.cuda[0] === 'text/x-cuda' && m.other.length === 1" \
                " && m.other[0] === 'text/x-ipython')(labmagicTest.mimes())"
    lab.wait(f"labmagicTest.panel().content.widgets.length === {added + 1} && {all_right}",
             what="the added cell to be CUDA")
    reset = lab.page.evaluate("(() => { const model = labmagicTest.panel().content.model;"
                              " const info = {...model.getMetadata('language_info'), version: 'changed-kernel'};"
                              " model.setMetadata('language_info', info);"
                              f" return [labmagicTest.mime(0), labmagicTest.mime({added})]; }})()")
    assert reset == ["text/x-ipython"] * 2  # the widget's reset, which the extension undoes
    lab.wait(all_right, what="the CUDA cells to be CUDA again, the others the kernel's language")
    assert _token(lab, 0, "// comment with an apostrophe's")["color"] == _token(lab, 1, "# python comment")["color"]
