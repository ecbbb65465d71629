"""Helpers shared by the notebook, site and browser tests: a scratch checkout, tiny chapters, one site build."""

from __future__ import annotations

import argparse
import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import yaml

from labmagic.cli import book as site

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))

#: Folders of book/ that hold pages of the site rather than chapters: a checkout without chapters keeps them.
SITE_FOLDERS = ("methods",)

_SITES: dict[str, Path] = {}


def build_site(root: Path, scratch: Path) -> Path:
    """Build ``root``'s book once per test session (into ``scratch``); return the html folder."""
    key = str(Path(root).resolve())
    if key not in _SITES:
        _SITES[key] = site.build(root, scratch, quiet=True)
    return _SITES[key]


def scratch_checkout(dest: Path, *, with_chapters: bool = True, with_results: bool = False) -> Path:
    """What a book build and a sweep read: _config.yml, _toc.yml, _static/, book/ (and results/), copied to
    ``dest``. Without chapters, the book's other pages (intro, Results, the Methods part) are still copied: the
    table of contents lists them."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, dest / name)
    if (ROOT / "_static").is_dir():  # the site's CSS
        shutil.copytree(ROOT / "_static", dest / "_static", dirs_exist_ok=True)
    (dest / "labmagic").mkdir(exist_ok=True)  # repo_root() recognises a checkout by _toc.yml + labmagic/
    (dest / "book").mkdir(exist_ok=True)
    for path in BOOK.iterdir():
        if path.is_file() and (with_chapters or not path.name.endswith(".ipynb")):
            shutil.copy(path, dest / "book" / path.name)
        elif path.is_dir() and (with_chapters or path.name in SITE_FOLDERS) and not path.name.startswith((".", "_")):
            shutil.copytree(path, dest / "book" / path.name)
    if not with_chapters:
        drop_toc_parts(dest / "_toc.yml", "book/exercises/")
    if with_results and (ROOT / "results").is_dir():
        shutil.copytree(ROOT / "results", dest / "results", dirs_exist_ok=True)
    (dest / "results").mkdir(exist_ok=True)
    return dest


def drop_toc_parts(toc: Path, folder: str) -> None:
    """Leave out of a scratch book's table of contents the parts whose pages live in ``folder``: the exercise
    notebooks link to the book's real chapters, which a scratch book of tiny chapters does not have, so they are not
    copied, and a toc glob that matches nothing is a warning (an error in the strict build)."""
    data = yaml.safe_load(toc.read_text())
    data["parts"] = [part for part in data["parts"]
                     if not any(str(entry.get("glob", entry.get("file", ""))).startswith(folder)
                                for entry in part.get("chapters", []))]
    toc.write_text(yaml.safe_dump(data, sort_keys=False))


def write_chapter(path: Path, *code_cells: str, title: str = "A tiny chapter") -> Path:
    """A chapter notebook with a title, a ``parameters`` cell (``size = "full"``) and the given code cells."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('size = "full"  # "quick" for a smoke run')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nWhat this chapter computes."), params]
    nb.cells += [nbformat.v4.new_code_cell(code) for code in code_cells]
    nbformat.write(nb, str(path))
    return path


def run_command(module, argv: list[str]) -> int:
    """Run a labmagic subcommand module the way ``labmagic.cli`` does: its own arguments, then ``run``."""
    parser = argparse.ArgumentParser(prog=module.__name__)
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def page_text(path: Path) -> str:
    """The visible text of an HTML page, whitespace collapsed."""
    parser = _Text()
    parser.feed(Path(path).read_text(encoding="utf-8"))
    return squash(html.unescape("".join(parser.parts)))


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# Sphinx's smartquotes turn prose's straight quotes into curly ones on the page (a title's "book's" reads "book’s").
SMART_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def compact(text: str) -> str:
    """Text without any whitespace, curly quotes read as straight: how code and titles are compared once Pygments has
    split code into spans and smartquotes has curled the prose's quotes."""
    return re.sub(r"\s+", "", text).translate(SMART_QUOTES)


def contains(page: str, text: str) -> bool:
    return compact(text) in compact(page)


def cell_sources(notebook: Path) -> list[tuple[str, str]]:
    nb = nbformat.read(str(notebook), as_version=4)
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def title_of(notebook: Path) -> str:
    """The chapter's first heading, as text (Markdown emphasis and code marks removed)."""
    for kind, source in cell_sources(notebook):
        if kind == "markdown":
            for line in source.splitlines():
                if line.startswith("# "):
                    return squash(re.sub(r"[`*_]|\$[^$]*\$", "", line[2:]))
    return ""


def signature_lines(notebook: Path) -> list[str]:
    """From each code cell, its longest line: text that must appear on the chapter's page."""
    lines = []
    for kind, source in cell_sources(notebook):
        if kind == "code" and source.strip():
            lines.append(squash(max(source.splitlines(), key=lambda line: len(line.strip()))))
    return lines
