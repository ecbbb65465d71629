"""Repository-wide pytest setup: ``gpu`` tests are skipped, with a reason, where no GPU exists."""

from __future__ import annotations

import pytest

import labmagic  # noqa: F401  (configures TRITON_INTERPRET / JAX before any test imports them)
from labmagic.runtime import has_gpu


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: the CUDA driver reports no device on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
