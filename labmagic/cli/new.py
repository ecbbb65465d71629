"""``labmagic new NAME``: scaffold a chapter notebook, ``book/NN_NAME.ipynb``, that runs as it is.

    labmagic new layernorm              # book/09_layernorm.ipynb: the number after the last chapter's
    labmagic new layernorm --number 12  # book/12_layernorm.ipynb
    labmagic new 12_layernorm           # the same

The notebook (:mod:`.chapter_template`) has chapter 01's structure: a race with its reference, awkward check shapes,
the sweep's ``size`` parameter, a small CUDA kernel and a Triton kernel, and the chapter's name in the race, which
names its CSV (``results/<gpu>/bench/NN_NAME.csv``). It passes ``labmagic test`` and nbval untouched, on a machine
without a GPU too. The site's table of contents lists ``book/NN_*`` by itself, so nothing else needs editing.

A name that is not a chapter name (:data:`labmagic.paths.CHAPTER_NAME`), a name or a number another chapter has, or a
number outside 00-99 is refused in one line, and then nothing is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from ..errors import LabError
from ..paths import CHAPTER_GLOB, atomic_write, book_dir, check_chapter_name

#: ``NN_name``: a chapter's number and name, as its file is called.
_NUMBERED = re.compile(r"(\d\d)_(.*)")
#: The name after the number: chapters are found by number (``01``) or by name (``vector_add``), so a name starts
#: with a letter and cannot be taken for a number.
NAME_PART = re.compile(r"[a-z][a-z0-9_]*")
#: Longer names make file and CSV names no reader wants to type.
MAX_NAME = 48


def add_arguments(parser) -> None:
    parser.add_argument("name", help="the chapter's name: lower-case letters, digits and underscores (layernorm), "
                                     "optionally with its number (12_layernorm)")
    parser.add_argument("--number", type=int, default=None, metavar="N",
                        help="the chapter's number, 0-99 (default: one more than the last chapter's)")


def _chapters(book: Path) -> dict[str, Path]:
    """The book's chapters by stem (``01_vector_add``)."""
    return {path.stem: path for path in sorted(book.glob(CHAPTER_GLOB))}


def chapter_stem(name: str, number: int | None, existing: list[str]) -> str:
    """``NN_name`` for a new chapter; a :class:`LabError` for a name or number the book cannot take."""
    check_chapter_name(name)
    numbered = _NUMBERED.fullmatch(name)
    if numbered:
        given, name = int(numbered.group(1)), numbered.group(2)
        if number is not None and number != given:
            raise LabError(f"{numbered.group(0)!r} has the number {given:02d} and --number says {number}: give only "
                           "one of them")
        number = given
    if not name:
        raise LabError(f"{numbered.group(0)!r} has no name after its number, like 12_layernorm")
    if not NAME_PART.fullmatch(name):
        raise LabError(f"{name!r} is not a chapter's name: it starts with a letter (layernorm, or 12_layernorm with "
                       "its number), since chapters are found by number or by name (labmagic test 01)")
    if len(name) > MAX_NAME:
        raise LabError(f"the name {name[:20]!r}... has {len(name)} characters: use at most {MAX_NAME}")
    same = [stem for stem in existing if stem[3:] == name]
    if same:
        raise LabError(f"a chapter named {name!r} exists: book/{same[0]}.ipynb")
    numbers = {int(stem[:2]): stem for stem in existing}
    if number is None:
        number = max(numbers, default=0) + 1
        if number > 99:
            raise LabError("the book has a chapter 99: give a free number with --number")
    if not 0 <= number <= 99:
        raise LabError(f"--number {number}: a chapter's number has two digits, 0-99")
    if number in numbers:
        free = next((n for n in range(max(numbers) + 1, 100)), None)
        hint = f" (the next free one after the last chapter is {free:02d})" if free is not None else ""
        raise LabError(f"chapter number {number:02d} is taken by book/{numbers[number]}.ipynb: give another with "
                       f"--number{hint}")
    return check_chapter_name(f"{number:02d}_{name}")


def create(name: str, number: int | None = None, book: Path | None = None) -> Path:
    """Write ``book/NN_name.ipynb``; its path. Everything is checked before anything is written."""
    book = Path(book or book_dir())
    if not book.is_dir():
        raise LabError(f"no book/ folder at {book}: run `labmagic new` inside a Kernel Lab checkout")
    stem = chapter_stem(name, number, list(_chapters(book)))
    from .chapter_template import chapter_notebook

    notebook = chapter_notebook(stem[:2], stem[3:])
    nbformat.validate(notebook)
    return atomic_write(book / f"{stem}.ipynb", nbformat.writes(notebook) + "\n")


def run(args) -> int:
    path = create(args.name, args.number)
    stem = path.stem
    print(f"wrote {path}")
    print(f"its rows go to results/<gpu>/bench/{stem}.csv; next: `labmagic test {stem[:2]}` (checks every variant), "
          f"open it in JupyterLab and make it yours, `labmagic sweep {stem[:2]}` on a GPU")
    return 0
