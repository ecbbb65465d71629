"""``%%dsl`` in a real IPython shell: a DSL that is missing, one that fails to import, and Helion running eagerly."""

from __future__ import annotations

import os
import traceback

import pytest

import labmagic
from labmagic import dsl
from labmagic.errors import LabError


@pytest.fixture
def missing(monkeypatch):
    monkeypatch.setitem(dsl.DSLS, "nosuch", dsl.DSL("nosuch", "labmagic_test_no_such_dsl", "nosuch", interpret=True))
    return "nosuch"


def test_missing_dsl_skips_the_cell_and_defines_stand_ins(shell, missing, capsys):
    shell.ns.pop("nosuch_softmax", None)
    shell.cell_magic("dsl", f"{missing} -d nosuch_softmax", "raise RuntimeError('the cell must not run')")
    assert "nosuch: skipped, nosuch is not installed" in capsys.readouterr().out
    with pytest.raises(labmagic.DSLUnavailable, match="nosuch_softmax: nosuch is not installed"):
        shell.ns["nosuch_softmax"]()


def test_a_dsl_that_fails_to_import_is_skipped_with_the_error(shell, monkeypatch, tmp_path, capsys):
    (tmp_path / "labmagic_test_broken_dsl.py").write_text("raise ImportError('built against another torch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dsl.DSLS, "broken", dsl.DSL("broken", "labmagic_test_broken_dsl", "broken", interpret=True))
    shell.cell_magic("dsl", "broken -d broken_gemm", "raise RuntimeError('the cell must not run')")
    assert "does not import here: ImportError: built against another torch" in capsys.readouterr().out
    with pytest.raises(labmagic.DSLUnavailable, match="broken_gemm: broken - does not import"):
        shell.ns["broken_gemm"]()


def test_a_name_that_is_not_an_identifier_or_not_defined_is_one_line(shell, missing):
    with pytest.raises(LabError, match="--defines takes a Python name"):
        shell.cell_magic("dsl", f"{missing} -d 'not a name'", "pass")
    if dsl.why_not("helion") is None:
        with pytest.raises(LabError, match="did not define helion_missing"):
            shell.cell_magic("dsl", "helion -d helion_missing", "x = 1")


def test_helion_cell_runs_eagerly_without_a_gpu_and_errors_keep_the_cells_line(shell, capsys):
    pytest.importorskip("helion")
    if labmagic.has_gpu():
        pytest.skip("the eager path is the no-GPU one")
    before = os.environ.get("TRITON_INTERPRET")
    shell.cell_magic("dsl", "helion -d helion_double", """\
import torch
import helion
import helion.language as hl

@helion.kernel(config=helion.Config(block_sizes=[16]))
def helion_double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = 2 * x[tile]
    return out
""")
    assert capsys.readouterr().out.startswith(f"helion {dsl.get('helion').version()} (eager, on the CPU)")
    assert os.environ.get("TRITON_INTERPRET") == before  # Triton's interpreter is back for the next cells
    x = shell.run("x = torch.randn(37); x")
    assert shell.run("helion_double(x)").equal(2 * x)
    with pytest.raises(ZeroDivisionError) as info:
        shell.cell_magic("dsl", "helion", "y = 1\n\nz = y / 0\n")
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename.startswith("<%%dsl helion")]
    assert frames and frames[-1].lineno == 3 and frames[-1].line == "z = y / 0"
