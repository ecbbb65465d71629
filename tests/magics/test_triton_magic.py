"""``%triton_panel`` in a real IPython shell: a kernel defined in a cell, a bound panel, and --vs."""

from __future__ import annotations

import pytest

from labmagic.analysis.triton_panel import TritonPanel
from labmagic.errors import LabError

pytest.importorskip("triton")

KERNEL = """\
import triton
import triton.language as tl

@triton.jit
def scale(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, 2.0 * tl.load(x + offs, mask=offs < n), mask=offs < n)
"""


def test_panel_of_a_cell_kernel_and_a_diff(shell):
    shell.run(KERNEL)
    first = shell.run("%triton_panel scale -s 'x: *fp32, out: *fp32, n: i32' -c BLOCK=1024 --as wide")
    assert isinstance(first, TritonPanel) and shell.ns["wide"] is first and first.mix["STG"] > 0
    second = shell.run("%triton_panel scale -s 'x: *fp32, out: *fp32, n: i32' -c BLOCK=64 --num-warps 2 "
                       "--vs wide --ir ptx")
    assert second.comparison.row("BLOCK").delta == "-960" and second.show == ("ptx",)
    assert "PTX" in repr(second)


def test_typo_is_one_line(shell):
    with pytest.raises(LabError, match="cannot evaluate 'no_such_kernel'"):
        shell.run("%triton_panel no_such_kernel -s 'x: *fp32'")
