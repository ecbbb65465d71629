"""No cell of a chapter rebinds a name that a function of the chapter reads as a global.

A chapter's launchers are functions that look up module-level names when they run: kernels, config tables,
helpers. If a later cell binds one of those names to something else, every call after that cell gets the new
object. At fa97a4a chapter 06's CuTeDSL cell bound ``compiled = cute_gemm_kernel(...)`` over the launchers' config
lookup ``compiled``, and ``cuda_splitk`` called CuTeDSL's kernel. Without CuTeDSL the cell is skipped, so the
book's CPU run could not see it; the H200's checks did, and stopped the sweep.

This reads every code cell as Python (``%%dsl`` bodies included; ``%%cuda_kernel`` cells are CUDA C), asks
``symtable`` which globals each function reads, and fails when such a name is bound at the top level of two cells
and the later one comes after the function's own cell. Importing the same module again under the same name is not
a rebinding.
"""

from __future__ import annotations

import ast
import json
import symtable
from dataclasses import dataclass

import pytest
from sitebuild import CHAPTERS

_SCOPES_RUN_IN_PLACE = {"lambda", "listcomp", "setcomp", "dictcomp", "genexpr"}  # not kept to be called later


def _python(source: str) -> str | None:
    """The cell as Python, line numbers kept: line magics and shell lines blanked, a ``%%dsl`` cell's body; None
    for any other cell magic (``%%cuda_kernel`` is CUDA C)."""
    lines = source.split("\n")
    if lines[0].startswith("%%"):
        if not lines[0].startswith("%%dsl"):
            return None
        lines[0] = ""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Names the cell binds at module level -> how: "import <module>" or "assignment" (defs, classes and loop
    targets included; not the bodies of functions, classes, lambdas or comprehensions)."""
    bound: dict[str, str] = {}

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node):  # its name is bound; its body is its own scope
            bound[node.name] = "assignment"

        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Lambda(self, node):
            pass

        visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

        def visit_Name(self, node):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bound[node.id] = "assignment"

        def visit_Import(self, node):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                module = alias.name if alias.asname else alias.name.split(".")[0]
                bound[name] = f"import {getattr(node, 'module', None) or ''}:{module}"

        visit_ImportFrom = visit_Import

    Visitor().visit(tree)
    return bound


def _globals_read(source: str) -> dict[str, set[str]]:
    """For every function (methods and nested functions included) the module-level names it reads."""
    out: dict[str, set[str]] = {}

    def walk(table: symtable.SymbolTable, prefix: str) -> None:
        for child in table.get_children():
            name = child.get_name()
            if child.get_type() == "function" and name not in _SCOPES_RUN_IN_PLACE:
                out[prefix + name] = {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
                walk(child, f"{prefix}{name}.")
            elif child.get_type() == "class":
                walk(child, f"{prefix}{name}.")

    walk(symtable.symtable(source, "<cell>", "exec"), "")
    return out


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based, among all of the notebook's cells, as JupyterLab counts them
    first_line: str
    binds: dict[str, str]
    reads: dict[str, set[str]]


def _cells(notebook: dict) -> list[Cell]:
    cells = []
    for number, cell in enumerate(notebook["cells"], 1):
        source = "".join(cell["source"])
        python = _python(source) if cell["cell_type"] == "code" else None
        if python is None:
            continue
        try:
            tree = ast.parse(python)
        except SyntaxError as exc:
            raise AssertionError(f"cell {number} ({source.splitlines()[0]!r}) is not Python this check can read: "
                                 f"line {exc.lineno}: {exc.msg}") from None
        cells.append(Cell(number, source.split("\n", 1)[0], _bindings(tree), _globals_read(python)))
    return cells


def late_rebindings(notebook: dict) -> list[str]:
    """One message per (function, name, later cell): a global the function reads, bound again after the
    function exists by a cell that is not the name's first binding."""
    cells = _cells(notebook)
    found = []
    for home in cells:
        for function, names in home.reads.items():
            for name in sorted(names):
                binders = [c for c in cells if name in c.binds]
                kinds = {c.binds[name] for c in binders}
                if len(binders) < 2 or (len(kinds) == 1 and next(iter(kinds)).startswith("import")):
                    continue
                for later in binders[1:]:
                    if later.number > home.number:
                        found.append(f"cell {home.number} ({home.first_line!r}) defines {function}(), which reads the "
                                     f"global {name!r}; cell {later.number} ({later.first_line!r}) binds {name!r} "
                                     f"again, so every call of {function}() after that cell uses the new object")
    return found


def _notebook(*sources: str) -> dict:
    return {"cells": [{"cell_type": "code", "source": s.splitlines(True)} for s in sources]}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_cell_rebinds_a_name_that_an_earlier_function_reads(chapter):
    found = late_rebindings(json.loads(chapter.read_text(encoding="utf-8")))
    assert not found, f"{chapter.name}: " + "\n".join(found)


def test_the_fa97a4a_rebinding_is_found():
    """The bug this guards against, in miniature: the launchers' lookup rebound by a later DSL cell."""
    found = late_rebindings(_notebook(
        "def compiled(table, config):\n    return table[config]\n",
        "def cuda_splitk(A, config):\n    return compiled(SPLITK, config)(A)\n",
        "%%dsl cutedsl -d cutedsl_gemm\nimport cutlass\ncompiled = cute_gemm_kernel(True)\n",
    ))
    assert len(found) == 1
    assert "cell 2 ('def cuda_splitk(A, config):') defines cuda_splitk()" in found[0]
    assert "cell 3 ('%%dsl cutedsl -d cutedsl_gemm') binds 'compiled' again" in found[0]


def test_a_name_first_bound_after_the_function_and_then_rebound_is_found():
    found = late_rebindings(_notebook("def launch():\n    return TABLE[0]\n", "TABLE = [1]\n", "TABLE = [2]\n"))
    assert len(found) == 1 and "cell 3" in found[0]


def test_methods_and_nested_functions_are_read():
    found = late_rebindings(_notebook(
        "size = 4\nclass Timer:\n    def time(self):\n        def inner():\n            return size\n        return inner()\n",
        "size = 8\n",
    ))
    assert [f.split(",")[0] for f in found] == ["cell 1 ('size = 4') defines Timer.time.inner()"]


@pytest.mark.parametrize("sources", [
    # the same module imported again, by a %%dsl cell that must stand alone
    ("import functools\n", "def f():\n    return functools.cache\n", "%%dsl triton\nimport functools\n"),
    # rebound only before the function exists: it only ever sees the last binding
    ("GPU = False\n", "GPU = True\n", "def f():\n    return GPU\n"),
    # bound in one cell only, twice there; a local of the same name; a parameter; a lambda run in place
    ("x = 1\nx = 2\ndef f(y):\n    z = y\n    return x + z\n", "def g():\n    x = 3\n    return x\n",
     "def h(x):\n    return x\n", "print(list(map(lambda v: v, [1])))\n"),
    # %%cuda_kernel cells are CUDA C, line magics and shell lines are not Python
    ("def f():\n    return kernel\n", "%%cuda_kernel -n kernel\n__global__ void kernel() {}\n",
     "%bench race\n!nvidia-smi\nkernel = 1\n"),
])
def test_what_is_not_a_rebinding(sources):
    assert late_rebindings(_notebook(*sources)) == []


def test_an_import_over_an_assignment_is_a_rebinding():
    found = late_rebindings(_notebook("np = None\n", "def f():\n    return np.zeros(1)\n", "import numpy as np\n"))
    assert len(found) == 1 and "binds 'np' again" in found[0]


def test_a_cell_that_is_not_python_says_where():
    with pytest.raises(AssertionError, match=r"cell 2 \('x = \('\) is not Python this check can read: line 1"):
        late_rebindings(_notebook("y = 1\n", "x = (\n"))
