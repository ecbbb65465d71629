"""A faulting kernel is reported once, plainly, naming the launch; later cells do not cascade."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from labmagic.compiler import faults


def test_sticky_errors_are_recognised_and_explained(monkeypatch):
    monkeypatch.setattr(faults, "_fault", None)
    monkeypatch.setattr(faults, "_recent", type(faults._recent)(maxlen=8))
    faults.record("vecadd_naive", (4, 1, 1), (256, 1, 1), 0)
    faults.record("oob_write", (1, 1, 1), (64, 1, 1), 128)
    exc = RuntimeError("CUDA error: an illegal memory access was encountered")
    assert faults.is_sticky(exc) and not faults.is_sticky(RuntimeError("shape mismatch"))
    err = faults.fault_error(exc)
    text = str(err)
    assert "oob_write<<<(1, 1, 1), (64, 1, 1), 128>>>" in text and "before it: vecadd_naive" in text
    assert "Restart the notebook kernel" in text and "%sanitize" in text
    # Once broken, further launches are refused with the same account instead of a new error.
    with pytest.raises(faults.KernelFaultError, match="still broken from an earlier fault"):
        faults.check_context()


@pytest.mark.gpu
def test_faulting_kernel_in_a_real_shell():
    """Runs in its own process: the fault really does break the CUDA context for good."""
    script = textwrap.dedent('''
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "labmagic")
        ip.run_cell("""%%cuda_kernel
        extern "C" __global__ void oob_write(float* x, int n) {
            x[threadIdx.x + (1ll << 40)] = 1.0f;  // far outside any allocation
        }""")
        ip.run_cell("import torch; x = torch.zeros(64, device='cuda')")
        ip.run_cell("oob_write(x, 64, grid=1, block=64)")
        r = ip.run_cell("torch.cuda.synchronize()")
        print("SYNC-ERROR:", type(r.error_in_exec).__name__)
        r = ip.run_cell("oob_write(x, 64, grid=1, block=64)")
        print("SECOND:", type(r.error_in_exec).__name__)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert "a CUDA kernel faulted" in out and "oob_write<<<(1, 1, 1), (64, 1, 1), 0>>>" in out, out
    assert "Restart the notebook kernel" in out
    assert "SYNC-ERROR:" in out and "SECOND: KernelFaultError" in out, out
