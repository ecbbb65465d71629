"""Where things live: the repository root, the book, results per device, the compile cache."""

from __future__ import annotations

import os
from pathlib import Path

from .runtime import device_slug


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
