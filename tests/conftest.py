"""Fixtures: a real IPython shell with the extension loaded, that re-raises what a cell raised."""

from __future__ import annotations

import pytest
from IPython.testing.globalipapp import start_ipython


class Shell:
    """Runs cells in a real InteractiveShell and hands back the value, or raises the cell's error."""

    def __init__(self, ip):
        self.ip = ip

    def run(self, cell: str):
        result = self.ip.run_cell(cell, store_history=True)
        if result.error_before_exec is not None:
            raise result.error_before_exec
        if result.error_in_exec is not None:
            raise result.error_in_exec
        return result.result

    def cell_magic(self, magic: str, line: str, body: str):
        """Run ``%%magic line`` over ``body`` exactly as a notebook cell would."""
        return self.run(f"%%{magic} {line}\n{body}")

    @property
    def ns(self):
        return self.ip.user_ns


@pytest.fixture(scope="session")
def _ipython():
    ip = start_ipython()
    ip.run_line_magic("load_ext", "labmagic")
    return ip


@pytest.fixture
def shell(_ipython):
    yield Shell(_ipython)
