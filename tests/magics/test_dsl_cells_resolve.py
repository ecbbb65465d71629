"""Every ``%%dsl`` cell of the book names only what it defines or what the chapter's own cells define.

Without the DSL installed (CI, a reader's laptop) a ``%%dsl`` cell is skipped, so a name it uses but never gets
(an import that another DSL's cell happened to make, say) shows only on the GPU, where it stops the chapter's
sweep. This reads each such cell with the chapter's non-DSL Python before it, as the GPU's kernel would run them
when every other DSL is missing, and asks ruff for undefined names (F821) inside the cell.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from sitebuild import CHAPTERS


def _dsl_cells():
    for notebook in CHAPTERS:
        sources = ["".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                   if c["cell_type"] == "code"]
        for i, source in enumerate(sources):
            if source.startswith("%%dsl"):
                # %%cuda_kernel cells are CUDA C (their kernels become names), other %%dsl cells may be skipped
                before = [s for s in sources[:i] if not s.startswith(("%%cuda_kernel", "%%dsl"))]
                yield pytest.param(before, source, id=f"{notebook.stem}:{source.split()[1]}")


def _python(source: str) -> str:
    return "\n".join("" if line.startswith("%") else line for line in source.split("\n"))  # keep line numbers


@pytest.mark.parametrize("before, cell", list(_dsl_cells()))
def test_a_dsl_cell_uses_no_name_that_the_chapter_does_not_define(before, cell, tmp_path):
    prefix = "\n".join(_python(s) for s in before) + "\n"
    code = tmp_path / "chapter.py"
    code.write_text(prefix + _python(cell), encoding="utf-8")
    first = prefix.count("\n") + 1  # the cell's first line in the file
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821",
                           "--output-format", "json", str(code)], capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    undefined = [f"line {d['location']['row'] - first + 1}: {d['message']}" for d in json.loads(proc.stdout)
                 if d["location"]["row"] >= first]
    assert not undefined, f"{cell.splitlines()[0]}: " + "; ".join(undefined)


def _helion_cells():
    for param in _dsl_cells():
        before, cell = param.values
        if cell.startswith("%%dsl helion"):
            yield pytest.param(cell, id=param.id)


@pytest.mark.parametrize("cell", list(_helion_cells()))
def test_a_helion_kernel_binds_no_underscore(cell):
    """Helion resolves a kernel's ``_`` (``n, _ = b.size()``) in the module's globals, where IPython keeps the last
    output: a kernel compiled after a cell that showed a path fails with ``unsupported argument type PosixPath``
    (the H200's prefill rows at f596539). A kernel body is a function that tiles with ``hl.tile``."""
    tree = ast.parse(_python(cell))
    kernels = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               and any(isinstance(n, ast.Attribute) and n.attr == "tile" for n in ast.walk(f))]
    assert kernels, "no Helion kernel body found in the cell"
    bad = [f"{f.name}, line {n.lineno}" for f in kernels for n in ast.walk(f) if isinstance(n, ast.Name) and n.id == "_"]
    assert not bad, "a Helion kernel binds `_`: " + "; ".join(bad)
