"""``python -m pytest --nbval book/`` passes on any GPU: the chapters' fresh outputs are compared with the stored ones
(an H200's) through ``book/nbval_sanitize.cfg``, which masks GPU names, times and error magnitudes, and nothing a
chapter does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns
from sitebuild import ROOT

SANITIZE = ROOT / "book" / "nbval_sanitize.cfg"


def sanitized(text: str) -> str:
    """``text`` as nbval sees it through the book's sanitize file."""
    for regex, replace in get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8")):
        text = re.sub(regex, replace, text)
    return text


def _race_outputs(device: str, slow: float, tie: bool):
    """A %bench result's text and HTML as two runs on two GPUs would show them: other times, another GPU, a tie in
    one and not the other, a row above the measured ceiling in one."""
    from labmagic.benchmark import roofline
    from labmagic.benchmark.race import BenchResult
    from labmagic.store.schema import Row

    rows = []
    for i, (variant, backend) in enumerate((("torch", "torch"), ("cuda_wgmma", "cuda"), ("triton_tma", "triton"))):
        ms = (1.0 + 0.1 * i) * slow
        rows.append(Row("06_tensor_core_gemm", variant, backend, "8192x8192x8192", "bfloat16", "ok",
                        flops=2 * 8192**3, nbytes=6 * 8192**2, ms_median=ms, ms_min=ms * 0.99, ms_max=ms * 1.02,
                        tflops=1100 / ms, gbps=400 / ms, sol_pct=70 / ms, ceiling_pct=(104 if i == 1 and slow < 1
                                                                                     else 99) / ms,
                        vs_ref=1.0 / (1.0 + 0.1 * i), vs_ref_low=0.9 if tie else 1.01, vs_ref_high=1.1,
                        err_over_tol=0.31 * slow, timer="cuda_event", source_hash=f"{int(slow * 1e6):012x}"))
    ceilings = roofline.Ceilings(copy_gbps=4292.4 * slow, matmul_tflops={"bf16": 694.76 * slow})
    result = BenchResult("06_tensor_core_gemm", rows, True, device, roofline.find_spec(device), ceilings,
                         timer="cuda_event")
    return repr(result), result._repr_html_()


def test_two_runs_of_a_race_differ_only_in_what_the_sanitizer_masks():
    h200 = _race_outputs("NVIDIA H200", 0.97, tie=True)
    a100 = _race_outputs("NVIDIA A100-SXM4-80GB", 1.31, tie=False)
    for here, there in zip(h200, a100, strict=True):
        assert here != there
        assert sanitized(here) == sanitized(there)
    assert "GPU" in sanitized(h200[0]) and "H200" not in sanitized(h200[0]) and "cuda_wgmma" in sanitized(h200[0])
    # What a chapter does is not masked: a variant that fails in one run is a difference.
    failed = a100[0].replace("triton_tma  ", "triton_tmX  ")
    assert sanitized(failed) != sanitized(h200[0])


def _chapter(path, source: str, stored: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    cell.execution_count = 1  # a cell that ran: nbval compares its outputs
    nb.cells = [cell]
    nbformat.write(nb, str(path))


@pytest.mark.slow
def test_the_readme_command_compares_through_the_sanitizer(tmp_path):
    """The README's command, `python -m pytest --nbval book/`, in a checkout whose chapter stored an H200's output
    and prints another GPU's: it passes, because the repository's conftest.py applies the sanitize file; with an
    empty one it fails; a chapter whose output differs in what it says fails."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    shutil.copy(SANITIZE, tmp_path / "book" / SANITIZE.name)
    code = ("import random\n"
            "print(f'NVIDIA A100-SXM4-80GB: cuda_float4 {random.uniform(0.5, 2):.4f} ms, "
            "max rel err {random.uniform(1e-6, 1e-3):.1e}, 94.2% of copy')")
    _chapter(tmp_path / "book" / "01_a.ipynb", code,
             "NVIDIA H200: cuda_float4 0.7283 ms, max rel err 2.4e-07, 103% of copy\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LABMAGIC_FORCE_CPU": "1"}

    def pytest_nbval(*extra):
        return subprocess.run([sys.executable, "-m", "pytest", "--nbval", "book/", "-q", "-p", "no:cacheprovider",
                               *extra], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    run = pytest_nbval()
    assert run.returncode == 0, run.stdout[-2000:]
    (tmp_path / "empty.cfg").write_text("")
    assert pytest_nbval("--nbval-sanitize-with", "empty.cfg").returncode == 1
    _chapter(tmp_path / "book" / "01_a.ipynb", code,
             "NVIDIA H200: cuda_vec4 0.7283 ms, max rel err 2.4e-07, 103% of copy\n")
    run = pytest_nbval()
    assert run.returncode == 1 and "cuda_vec4" in run.stdout


def test_the_sanitize_file_is_what_nbval_reads():
    """Every section is a regex and its replacement on the two lines nbval reads; each regex compiles."""
    sections = re.findall(r"^\[([a-z_]+)\]$", SANITIZE.read_text(encoding="utf-8"), re.MULTILINE)
    patterns = get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8"))
    assert len(patterns) == len(sections) >= 8
    for regex, _ in patterns:
        re.compile(regex)
    assert json.loads(json.dumps(sanitized("NVIDIA H200 (SXM) 0.7283 ms"))) == "GPU N ms"
