"""benchmarks/sass_compare.py: a kernel moved to another cell compares equal to itself at the base revision, a
changed kernel does not, with real NVRTC on the CPU and a real git repository."""

from __future__ import annotations

import subprocess

import nbformat
import pytest
from benchscripts import load_script

SCALE = """template <typename T>
__global__ void scale(T* x, T a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= a;
}
"""
ADD = """__global__ void add_one(float* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += 1.f;
}
"""
NEGATE = """__global__ void negate(float* x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = %s;
}
"""


def _chapter(path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))


def _git(repo, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_moved_kernel_compares_equal_and_a_changed_one_does_not(tmp_path, capsys):
    sc = load_script("sass_compare")
    repo = tmp_path / "repo"
    (repo / "book").mkdir(parents=True)
    chapter = repo / "book" / "99_tiny.ipynb"
    _chapter(chapter, "%%cuda_kernel -n 'scale<float>' -n 'scale<int>'\n" + ADD + SCALE + NEGATE % "-x[i]")
    _git(repo, "init", "-q")
    _git(repo, "add", "book")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one cell")
    # The working tree: add_one moved to a cell of its own (so its branch labels are numbered anew), negate changed.
    _chapter(chapter, "%%cuda_kernel -n 'scale<float>' -n 'scale<int>'\n" + SCALE + NEGATE % "0.f - 2.f * x[i]",
             "%%cuda_kernel\n" + ADD)

    assert sc.main(["book/99_tiny.ipynb", "--root", str(repo), "--context", "4"]) == 1
    out = capsys.readouterr().out
    assert "== book/99_tiny.ipynb: 4 kernels now, 4 at HEAD" in out and "1 differ" in out
    assert "same   add_one: " in out and "same   scale<float>: " in out and "same   scale<int>: " in out
    assert "DIFF   negate: SASS differs (instructions" in out
    assert "1 kernel(s) differ" in out


def test_branch_labels_and_internal_calls_are_numbered_within_the_kernel():
    sc = load_script("sass_compare")
    first = ["@P0 BRA `(.L_x_7)", "CALL.REL.NOINC `($__internal_3_$__cuda_sm3x_div_rn_noftz_f32_slowpath)",
             "BRA `(.L_x_9)", "BRA `(.L_x_7)"]
    moved = ["@P0 BRA `(.L_x_102)", "CALL.REL.NOINC `($__internal_0_$__cuda_sm3x_div_rn_noftz_f32_slowpath)",
             "BRA `(.L_x_40)", "BRA `(.L_x_102)"]
    assert sc.numbered_labels(first) == sc.numbered_labels(moved)
    assert sc.numbered_labels(first) != sc.numbered_labels(moved[:3] + ["BRA `(.L_x_40)"])  # another target


def test_register_renaming_is_told_apart_from_other_differences():
    sc = load_script("sass_compare")
    res = {f: 0 for f in sc.RESOURCE_FIELDS}
    before = {"k": {"sass": ["IADD3 R4, R2, UR5, RZ", "STG.E [R4.64], R6"], "resources": res}}
    renamed = {"k": {"sass": ["IADD3 R8, R3, UR7, RZ", "STG.E [R8.64], R6"], "resources": res}}
    other = {"k": {"sass": ["IMAD R8, R3, 0x4, RZ", "STG.E [R8.64], R6"], "resources": dict(res, registers=2)}}
    lines, differ = sc.compare(before, renamed, 0)
    assert differ == 1 and "register numbering only" in lines[0]
    lines, differ = sc.compare(before, other, 0)
    assert differ == 1 and "(instructions:" in lines[0] and "registers 0 -> 2" in lines[0]
    assert sc.compare(before, before, 0) == (["same   k: 2 instructions, 0 reg, 0 B smem, 0 B stack, 0/0 B spill"], 0)


def test_a_magic_lines_name_is_expanded_from_the_cell_that_assigns_it():
    sc = load_script("sass_compare")
    cells = ["flags = '-n old'", "%%cuda_kernel\n__global__ void k() {}",
             "NAMES = ['f<1>', 'f<2>']\nflags = ' '.join(f\"-n '{n}'\" for n in NAMES)"]
    assert sc.expand_line("%%cuda_kernel --arch sm_90a {flags}", cells) == "%%cuda_kernel --arch sm_90a -n 'f<1>' -n 'f<2>'"
    with pytest.raises(SystemExit, match="no cell before it assigns"):
        sc.expand_line("%%cuda_kernel {other}", cells)
    with pytest.raises(SystemExit, match="does not run alone"):
        sc.expand_line("%%cuda_kernel {flags}", ["flags = ' '.join(NAMES)"])
    with pytest.raises(SystemExit, match="notebook expressions"):
        sc.expand_line("%%cuda_kernel {flags + 'x'}", cells)
    # labmagic, which every chapter imports, is there (chapter 10's flags cell also asks it for the SM count)
    sms = ["flags = '-n g<2>'\nSMS = labmagic.runtime.sm_count()"]
    assert sc.expand_line("%%cuda_kernel {flags}", sms) == "%%cuda_kernel -n g<2>"


def test_a_renamed_kernel_is_compared_under_its_new_name():
    sc = load_script("sass_compare")
    res = {f: 0 for f in sc.RESOURCE_FIELDS}
    before = {"old<4>": {"sass": ["EXIT"], "resources": res}, "kept": {"sass": ["NOP"], "resources": res}}
    after = {"new<4, 2>": {"sass": ["EXIT"], "resources": res}, "kept": {"sass": ["NOP"], "resources": res}}
    assert sc.compare(before, after, 0)[1] == 2  # ONLY BEFORE and ONLY AFTER
    moved, was = sc.renamed(before, ["old<4>=new<4, 2>", "absent=other"])
    lines, differ = sc.compare(moved, after, 0, was)
    assert differ == 0 and lines[1].startswith("same   new<4, 2> (was old<4>): 1 instructions")
    with pytest.raises(SystemExit, match="give OLD=NEW"):
        sc.renamed(before, ["old<4>"])
