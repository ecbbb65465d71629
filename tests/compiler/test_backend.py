"""The compile backend, chosen in one place: NVRTC under a CUDA (or CPU) build of torch; under a ROCm build
(``torch.version.hip`` set, simulated here) a ``%%cuda_kernel`` cell refuses in one line, before NVRTC runs."""

from __future__ import annotations

import re
import uuid

import pytest
import torch

import labmagic
from labmagic.compiler import backend
from labmagic.errors import one_line

HIP = "6.2.41133-dd7f95766"


def _cell(name: str) -> str:
    return (f"// {uuid.uuid4()}\n"
            f'extern "C" __global__ void {name}(float* x, int n) {{ if (threadIdx.x < n) x[threadIdx.x] += 1.0f; }}')


@pytest.fixture
def rocm_torch(monkeypatch, tmp_path):
    """This process's torch reporting a HIP version, as a ROCm build does; an empty compile cache to watch."""
    monkeypatch.setattr(torch.version, "hip", HIP)
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_cuda_kernel_cell_on_rocm_says_in_one_line_that_the_hip_track_is_not_built(shell, rocm_torch, capsys):
    with pytest.raises(backend.BackendUnavailable) as caught:
        shell.cell_magic("cuda_kernel", "", _cell("bump_on_rocm"))
    message = one_line(caught.value)
    assert "\n" not in message
    assert f"ROCm build (HIP {HIP})" in message and "HIP track is not built yet" in message
    assert "hipRTC" in message and "Porting to ROCm" in message
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "BackendUnavailable: this torch is a ROCm build" in shown and "Traceback" not in shown
    # Refused before NVRTC: nothing compiled, cached or bound.
    assert "bump_on_rocm" not in shell.ns
    assert not rocm_torch.exists() or not any(rocm_torch.iterdir())


def test_every_way_to_compile_goes_through_the_same_choice(rocm_torch):
    assert backend.compile_backend() == backend.HIPRTC
    with pytest.raises(backend.BackendUnavailable, match="hipRTC"):
        labmagic.compile_cuda(_cell("bump_from_python"))


def test_a_cuda_or_cpu_torch_compiles_with_nvrtc(shell, monkeypatch):
    monkeypatch.setattr(torch.version, "hip", None)
    assert backend.compile_backend() == backend.NVRTC
    shell.cell_magic("cuda_kernel", "", _cell("bump_on_cuda"))
    assert shell.ns["bump_on_cuda"].signature == "bump_on_cuda(float* x, int n)"
