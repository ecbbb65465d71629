"""``%exercise NAME`` in a real IPython shell: it grades the cells this session ran, in a child, and returns the grade
without raising, whatever the cells do; a wrong name or an unmarked exercise is "not graded" in one line."""

from __future__ import annotations

from labmagic.exercises.verdict import Grade

STUB = '''\
# exercise: scale_add
@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    pass


def scale_add(x, y, alpha, out):
    scale_add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, alpha, x.numel(), BLOCK=1024)
'''


def test_a_stub_is_graded_and_fails_without_raising(shell):
    shell.run("import triton\nimport triton.language as tl")
    shell.run(STUB)
    grade = shell.run("%exercise scale_add --seed 7")
    assert isinstance(grade, Grade)
    assert grade.status == "fail" and "not written" in grade.verdict, grade.verdict
    assert grade.seed == 7 and grade.origin == "this notebook's session"
    assert "FAIL" in repr(grade) and "<div class='labmagic-exercise'>" in grade._repr_html_()


def test_a_wrong_name_is_not_graded_in_one_line(shell):
    grade = shell.run("%exercise no_such_exercise")
    assert grade.status == "not_graded" and grade.verdict.startswith("no exercise 'no_such_exercise' in the book")
    assert "\n" not in grade.verdict


def test_an_exercise_without_marked_cells_is_not_graded(shell):
    grade = shell.run("%exercise wgmma_desc")
    assert grade.status == "not_graded"
    assert "no cell in this notebook's session is marked for exercise 'wgmma_desc'" in grade.verdict
