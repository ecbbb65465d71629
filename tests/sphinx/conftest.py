"""The headless Chromium the site tests share (one per test module)."""

from __future__ import annotations

import pytest
from chromium import Chromium, find_chromium


@pytest.fixture(scope="module")
def browser():
    executable, why = find_chromium(install=True)
    if executable is None:
        pytest.skip(f"headless Chromium unavailable: {why}")
    with Chromium(executable) as chromium:
        yield chromium
