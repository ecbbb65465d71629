"""What a chapter's results depend on: a hash of its notebook's cell sources, the kernel files it uses and the
headers its CUDA includes.

``labmagic sweep`` stores this hash next to each executed notebook and skips a chapter whose hash has not changed
since its last successful run on this GPU; the Results pages use it to mark results stale. Outputs and execution
metadata are left out, so re-executing a notebook (or writing its outputs back into ``book/``) does not change it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path

from ..compiler.includes import SearchPath, include_options, scan
from ..errors import LabError
from ..paths import atomic_write, book_include_dir

#: Files a chapter may load kernels from, when the notebook names them in a string literal or they sit in
#: ``book/<chapter>/``.
KERNEL_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".py")

_SUFFIX_PATTERN = "|".join(re.escape(s) for s in KERNEL_SUFFIXES)
_QUOTED_PATH = re.compile(r"""["']([^"'\n]+?(?:""" + _SUFFIX_PATTERN + r"""))["']""")


def read_notebook(path: Path) -> dict:
    """A notebook's JSON; a one-line LabError naming the file when it is not one (truncated, say)."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LabError(f"{path}: not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); "
                       f"truncated? restore it with git") from None
    except UnicodeDecodeError:
        raise LabError(f"{path}: not a notebook: not UTF-8 text") from None
    cells = nb.get("cells", []) if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise LabError(f"{path}: not a notebook: no list of cells")
    return nb


def write_notebook(path: Path, nb: dict) -> None:
    """Write ``nb`` as nbformat and JupyterLab do (one-space indent, non-ASCII kept, a final newline), atomically."""
    atomic_write(Path(path), json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def notebook_cells(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell, outputs and metadata left out."""
    nb = read_notebook(path)
    cells = []
    for cell in nb.get("cells", []):
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:  # papermill's, written back by `sweep --reference`
            continue
        cells.append((cell.get("cell_type", ""), source))
    return cells


def kernel_files(notebook: Path) -> list[Path]:
    """Kernel sources the chapter uses: files it names in string literals, everything in ``book/<chapter>/``, and
    every header these and its cells include, transitively (:func:`included_headers`)."""
    notebook = Path(notebook)
    folder = notebook.parent
    found: set[Path] = set()
    cells = [source for kind, source in notebook_cells(notebook) if kind == "code"]
    for source in cells:
        for name in _QUOTED_PATH.findall(source):
            candidate = (folder / name).resolve()
            if candidate.is_file():
                found.add(candidate)
    own = folder / notebook.stem
    if own.is_dir():
        found.update(p.resolve() for p in own.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    found.update(included_headers(folder, cells, sorted(found)))
    return sorted(found)


def included_headers(folder: Path, cells: list[str], files: list[Path]) -> set[Path]:
    """The headers that code ``cells`` of a notebook in ``folder`` and its C/C++ kernel ``files`` include,
    transitively, found as NVRTC finds them (:mod:`labmagic.compiler.includes`): a cell's quoted includes from
    ``folder`` (where a sweep runs the notebook), then the ``-I`` folders of its ``%%cuda_kernel`` line, then the
    book's include folder. Toolkit headers are not found here, and need not be: they change with the toolkit."""
    folder = Path(folder).resolve()
    book = book_include_dir(folder)
    project = (str(book),) if book is not None else ()
    headers: set[Path] = set()
    for source in cells:
        own, pre = _magic_include_options(source)
        search = SearchPath(cwd=str(folder), dirs=(*own, *project), project=project, pre_includes=tuple(pre))
        headers.update(Path(h.path).resolve() for h in scan(source, search).headers)
    for path in files:
        if path.suffix in (".cu", ".cuh", ".h", ".hpp", ".cpp"):
            text = path.read_bytes().decode("utf-8", errors="replace")
            search = SearchPath(cwd=str(path.parent), dirs=project, project=project)
            headers.update(Path(h.path).resolve() for h in scan(text, search).headers)
    return headers


def _magic_include_options(source: str) -> tuple[list[str], list[str]]:
    """The ``-I`` folders and pre-included files on a ``%%cuda_kernel`` cell's first line."""
    first = source.lstrip().partition("\n")[0]
    if not first.startswith("%%cuda_kernel"):
        return [], []
    try:
        words = shlex.split(first)
    except ValueError:  # an unclosed quote: the magic itself will refuse the line
        words = first.split()
    return include_options(words[1:])


def chapter_hash(notebook: Path) -> str:
    """sha256 (16 hex digits) over the notebook's cell sources and the contents of its kernel files."""
    notebook = Path(notebook)
    digest = hashlib.sha256()
    for kind, source in notebook_cells(notebook):
        if kind != "code":
            continue  # prose does not change what a run measures: editing the writeup leaves results fresh
        digest.update(kind.encode() + b"\0" + source.encode("utf-8") + b"\0")
    for path in kernel_files(notebook):
        try:
            name = path.relative_to(notebook.parent.resolve()).as_posix()
        except ValueError:
            name = path.name
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
