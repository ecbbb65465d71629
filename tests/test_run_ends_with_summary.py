"""A test run ends with pytest's summary line: triton's nanobind bindings report the objects still alive when the
interpreter finalizes, and the repository's conftest.py ends the process before that (with pytest's exit status)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from sitebuild import ROOT

#: A test that keeps a triton object alive to the end, as a session-wide shell keeps its compiled kernels.
LEAKS = '''import ctypes

import triton._C.libtriton as lt


def test_keeps_a_triton_context_alive():
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(lt.ir.context()))
'''


def _pytest(folder, **env):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."], cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("failing", [False, True], ids=["passing", "failing"])
def test_the_summary_is_the_last_line_and_the_status_is_pytests(tmp_path, failing):
    pytest.importorskip("triton._C.libtriton")
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leaks.py").write_text(LEAKS + ("\n\ndef test_fails():\n    assert False\n" if failing else ""))
    run = _pytest(tmp_path)
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert "nanobind" not in run.stdout + run.stderr
    assert lines[-1].startswith("1 failed, 1 passed in " if failing else "1 passed in "), lines[-3:]
    assert run.returncode == (1 if failing else 0)
    if not failing:  # without the exit, the interpreter's finalization reports the object after the summary
        kept = _pytest(tmp_path, LABMAGIC_PYTEST_FINALIZE="1")
        assert "nanobind: leaked 1 instances!" in kept.stderr and kept.returncode == 0
