"""Repository-wide pytest setup: ``gpu`` tests are skipped, with a reason, where no GPU exists, and
``python -m pytest --nbval book/`` compares the chapters' outputs through ``book/nbval_sanitize.cfg``."""

from __future__ import annotations

from pathlib import Path

import pytest

import labmagic  # noqa: F401  (configures TRITON_INTERPRET / JAX before any test imports them)
from labmagic.runtime import has_gpu

#: What nbval masks in a chapter's outputs before comparing them (GPU names, times, error magnitudes): the stored
#: outputs are one run on the book's H200, and a run on any GPU differs from it in those and only those.
NBVAL_SANITIZE = Path(__file__).resolve().parent / "book" / "nbval_sanitize.cfg"


def pytest_configure(config):
    option = config.option
    if (hasattr(option, "nbval_sanitize_with") and not option.nbval_sanitize_with
            and not getattr(option, "sanitize_with", None)):  # a file named on the command line wins
        option.nbval_sanitize_with = str(NBVAL_SANITIZE)


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: the CUDA driver reports no device on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

