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


GLUON_CELL = """\
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def gluon_scale_kernel(x_ptr, y_ptr, n, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])  # 16 bytes of fp32 a thread
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(y_ptr + offs, 2.0 * gl.load(x_ptr + offs, mask=mask), mask=mask)


def gluon_scale(x):
    y = torch.empty_like(x)
    gluon_scale_kernel[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512)
    return y


panel = labmagic.triton_panel(gluon_scale_kernel, "x_ptr: *fp32, y_ptr: *fp32, n: i32", {"BLOCK": 512})
if labmagic.has_gpu():
    gluon_scale(torch.randn(1000, device="cuda"))
"""


def test_a_gluon_compile_cell_compiles_without_a_gpu_and_its_variants_stay_stand_ins(shell, capsys):
    """``--compile``: the cell runs on a machine without a GPU, so its kernel's panel is there (the layout it
    asked for, and SASS); the variant it defines cannot run here and reads needs_gpu."""
    pytest.importorskip("triton.experimental.gluon")
    if labmagic.has_gpu():
        pytest.skip("the compile-only path is the no-GPU one")
    shell.run("import labmagic, triton")
    shell.cell_magic("dsl", "gluon -d gluon_scale", GLUON_CELL)  # without --compile: skipped
    assert "gluon: skipped, gluon has no interpreter" in capsys.readouterr().out and "panel" not in shell.ns
    shell.cell_magic("dsl", "gluon --compile -d gluon_scale", GLUON_CELL)
    out = capsys.readouterr().out
    assert out.startswith(f"gluon {dsl.get('gluon').version()} (compile only: no GPU here); gluon_scale: stand-ins")
    panel = shell.ns["panel"]
    assert panel.arch == "sm_90" and panel.mix["LDG"] >= 1 and panel.mix["STG"] >= 1 and panel.registers > 0
    assert "#ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4]" in panel.irs["ttgir"]
    with pytest.raises(labmagic.NoGPUError, match="gluon_scale: gluon has no interpreter"):
        shell.ns["gluon_scale"](None)
    # A second run of a cell that no longer defines the variant is told so, though the stand-in is still there.
    with pytest.raises(LabError, match="did not define gluon_scale"):
        shell.cell_magic("dsl", "gluon --compile -d gluon_scale", "x = 1")
