"""Development journals (runs, patches, raw Nsight Compute pages) live in book/notes/NN/, beside the chapter that
tells their story; results/<gpu>/ holds what a sweep or a benchmark script writes. The site does not render the
notes, and every note a chapter's prose names is there."""

from __future__ import annotations

import json
import re

import yaml
from sitebuild import BOOK, CHAPTERS, ROOT

NOTES = BOOK / "notes"
#: A path in a chapter's prose, in backticks: `book/notes/06/decode_development.txt`, or a glob of them.
NOTE_PATH = re.compile(r"`(book/notes/[^`\s]+)`")


def _prose(chapter) -> str:
    cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_the_site_leaves_the_notes_out():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "book/notes" in config["exclude_patterns"]
    toc = (ROOT / "_toc.yml").read_text()
    assert "book/notes" not in toc


def test_each_notes_folder_belongs_to_a_chapter():
    numbers = {chapter.name[:2] for chapter in CHAPTERS}
    folders = sorted(p.name for p in NOTES.iterdir() if p.is_dir())
    assert folders and set(folders) <= numbers, f"notes folders {folders}; chapters {sorted(numbers)}"


def test_every_note_a_chapter_names_is_there():
    named = {(chapter.stem, path) for chapter in CHAPTERS for path in NOTE_PATH.findall(_prose(chapter))}
    assert named, "no chapter names a note in book/notes/"
    missing = [f"{stem}: {path}" for stem, path in sorted(named) if not any(ROOT.glob(path.rstrip("/")))]
    assert not missing, "\n".join(missing)
    for stem, path in named:  # a chapter names its own notes
        assert path.startswith(f"book/notes/{stem[:2]}/"), f"{stem} names {path}"


def test_results_hold_no_development_journal():
    journals = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("results/*/*")
                      if "_development" in p.name or p.suffix == ".patch")
    assert not journals, f"development journals in results/ (they belong in book/notes/NN/): {journals}"
