"""Where things live: the repository root, the book, its chapters and its shared headers, results per device, the
compile cache."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .errors import LabError, shown
from .runtime import device_slug

#: A chapter notebook in ``book/``: two digits, an underscore, a name.
CHAPTER_GLOB = "[0-9][0-9]_*.ipynb"

#: The longest chapter or variant name. Each becomes part of a file name (``bench/<chapter>.<dtype>.png``,
#: ``profiles/<chapter>/<variant>.<shape>.ncu-rep``), which Linux caps at 255 bytes (NAME_MAX): 128 leaves the
#: rest to the shape and the suffixes, and is about five times the longest name the book uses.
MAX_NAME = 128

#: A race's chapter names files in ``results/`` (``bench/<chapter>.csv``), so it must be one plain file name. The
#: book's are ``NN_name``; tests and scripts race ``test_race`` or ``timer_agreement``, so the digits are optional.
CHAPTER_NAME = re.compile(rf"[a-z0-9][a-z0-9_]{{0,{MAX_NAME - 1}}}")

#: A variant names profile reports (``profiles/<chapter>/<variant>.<shape>``) and is the key in code, CSV and the book:
#: ASCII only, so no character (a right-to-left override, a look-alike letter) can make one name read as another.
VARIANT_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME - 1}}}")


def check_chapter_name(name) -> str:
    """``name`` if it is a chapter name (``01_vector_add``), else a :class:`LabError`: it becomes part of a path
    under ``results/``, and ``../`` or ``/`` in it would write outside."""
    if not isinstance(name, str) or not CHAPTER_NAME.fullmatch(name):
        raise LabError(f"chapter {shown(name)} is not a chapter name: use lower-case letters, digits and underscores, "
                       f"at most {MAX_NAME} of them, like 01_vector_add (it names files under results/)")
    return name


def check_variant_name(name) -> str:
    """``name`` if it is identifier-like (``cuda_float4``), else a :class:`LabError` (it becomes a file name)."""
    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise LabError(f"variant {shown(name)} is not a variant name: use letters, digits and underscores, not "
                       f"starting with a digit, at most {MAX_NAME} of them, like cuda_float4 (it names files under "
                       "results/)")
    return name


def check_race_name(name) -> str:
    """``name`` if it is a race's name in its chapter (``race_fp32``), else a :class:`LabError`: it is replayed in
    a child and names profile reports, so the ASCII identifiers of :data:`VARIANT_NAME` only."""
    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise LabError(f"race name {shown(name)} is not a Python name (letters, digits and underscores, at most "
                       f"{MAX_NAME}, like race_fp32)")
    return name


def repo_root() -> Path:
    """The Kernel Lab checkout: ``LABMAGIC_ROOT``, else the nearest parent of cwd holding ``_toc.yml``,
    else the parent of this package (an editable install)."""
    env = os.environ.get("LABMAGIC_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").exists() and (folder / "labmagic").is_dir():
            return folder
    return Path(__file__).resolve().parent.parent


def book_dir() -> Path:
    return repo_root() / "book"


def book_include_dir(book: Path | None = None) -> Path | None:
    """The book's shared device headers (``book/include``, holding ``lab/*.cuh``), which every compile puts on NVRTC's
    include path: ``LABMAGIC_INCLUDE_DIR``, else ``include/`` in ``book`` (default :func:`book_dir`); None where there
    is none (an installed package without the repository). A LabError when ``LABMAGIC_INCLUDE_DIR`` names no folder."""
    env = os.environ.get("LABMAGIC_INCLUDE_DIR")
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():
            raise LabError(f"LABMAGIC_INCLUDE_DIR={env!r} is not a folder: point it at the book's include folder "
                           "(book/include) or unset it")
        return folder.resolve()
    folder = (book if book is not None else book_dir()) / "include"
    return folder.resolve() if folder.is_dir() else None


def all_chapters() -> list[Path]:
    return sorted(book_dir().glob(CHAPTER_GLOB))


def select_chapters(names: list[str]) -> list[Path]:
    """Chapters by number (``01``), stem (``01_vector_add``), name (``vector_add``) or path; all when none given."""
    chapters = all_chapters()
    if not names:
        return chapters
    chosen: list[Path] = []
    for name in names:
        stem = Path(name).stem
        matches = [c for c in chapters if stem in (c.stem, c.stem[:2], c.stem[3:])]
        if not matches:
            known = ", ".join(c.stem for c in chapters) or "none"
            raise LabError(f"no chapter {name!r} in {book_dir()} (chapters: {known})")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def chapter_path(name_or_path: str | os.PathLike) -> Path:
    """A chapter notebook by path, or by number (``01``), stem (``01_vector_add``) or name (``vector_add``)."""
    path = Path(name_or_path)
    if path.suffix == ".ipynb" and path.exists():
        return path.resolve()
    matches = select_chapters([str(name_or_path)])
    if len(matches) != 1:
        raise LabError(f"chapter {name_or_path!r} is ambiguous: {', '.join(m.stem for m in matches)}")
    return matches[0].resolve()


def results_dir(slug: str | None = None) -> Path:
    """``results/<slug>/`` for this machine's device (``cpu`` without a GPU)."""
    return repo_root() / "results" / (slug or device_slug())


def cache_dir() -> Path:
    """On-disk compile cache: ``LABMAGIC_CACHE_DIR``, else ``$XDG_CACHE_HOME/labmagic``."""
    env = os.environ.get("LABMAGIC_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "labmagic"


def atomic_write(path: Path | str, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half of one.

    A temporary file in the same folder (:func:`staged_write`), flushed to disk, then ``os.replace``; readable by
    everyone (results are shared), unlike ``mkstemp``'s private default.
    """
    path = Path(path)
    tmp = staged_write(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def staged_write(path: Path | str, data: bytes | str) -> Path:
    """``data`` in a new hidden file beside ``path``, flushed to disk and readable by everyone: what
    :func:`atomic_write` moves into place, for a caller that moves several files into place only once all are
    written. Nothing is left behind when writing fails (a full disk)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return Path(tmp)
