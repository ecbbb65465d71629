"""Repository-wide pytest setup: ``gpu`` tests are skipped, with a reason, where no GPU exists;
``python -m pytest --nbval book/`` compares the chapters' outputs through ``book/nbval_sanitize.cfg``; and the run
ends with pytest's summary line.

The last point: triton's and jaxlib's bindings are built with nanobind, which reports, as the interpreter finalizes,
every object of theirs still alive ("nanobind: leaked 1 instances! ... leaked 199 functions!"): a compiled kernel
in a session-wide shell is, by design. Those lines came after pytest's summary, so a run did not end with its
verdict. Once pytest has reported, the process runs Python's exit handlers and exits with pytest's status, without
the interpreter's finalization, where those reports are made (``LABMAGIC_PYTEST_FINALIZE=1`` keeps it).
"""

from __future__ import annotations

import atexit
import os
import sys
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


#: Modules built with nanobind whose leak reports follow pytest's summary when the interpreter finalizes.
NANOBIND_MODULES = ("triton._C.libtriton", "jaxlib")


def pytest_sessionfinish(session, exitstatus):
    session.config._labmagic_exitstatus = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After everything pytest prints: exit without finalizing the interpreter where a nanobind module is loaded."""
    status = getattr(config, "_labmagic_exitstatus", None)
    if status is None or os.environ.get("LABMAGIC_PYTEST_FINALIZE") == "1":
        return
    if not any(name in sys.modules for name in NANOBIND_MODULES):
        return
    atexit._run_exitfuncs()  # what a normal exit runs: temporary files, child processes, logging, flushed streams
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
