"""Kernels load from the compiled bytes in memory, never from a file rewritten before the load (issue #56, item 5):
a cache folder that cannot be written costs only the disk copy."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

import labmagic
from labmagic.compiler import cache, cubin_load
from labmagic.compiler.cubin_load import CubinKernel

SOURCE = 'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n'


def _unique(body: str) -> str:
    return f"// {np.random.default_rng().integers(1 << 62)}\n{body}"


@pytest.fixture
def unwritable_cache(tmp_path, monkeypatch):
    """A cache folder below a plain file: nothing can be written there (for root as for anyone), nothing read."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(blocker / "cache"))
    return blocker / "cache"


class _Driver:
    """What CuPy's ``Module`` is asked to load, for a machine without CuPy or a GPU: a stand-in for the driver
    only, to show what labmagic hands over."""

    def __init__(self):
        self.loads: list[tuple[int, bytes]] = []
        self.device = 0
        driver = self

        class Module:
            def load(self, image):
                assert type(image) is bytes
                driver.loads.append((driver.device, image))

            def get_function(self, name):
                return ("function", name)

        self.module = types.SimpleNamespace(Module=Module)
        self.runtime = types.SimpleNamespace(getDevice=lambda: driver.device)


@pytest.fixture
def driver(monkeypatch):
    fake = _Driver()
    cuda = types.SimpleNamespace(function=fake.module, runtime=fake.runtime)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.function", fake.module)
    monkeypatch.setitem(sys.modules, "cupy.cuda.runtime", fake.runtime)
    monkeypatch.setattr(cubin_load, "_MODULES", {})
    return fake


def test_a_kernel_is_loaded_from_the_checked_bytes_with_no_file_written(unwritable_cache, driver):
    module = labmagic.compile_cuda(_unique(SOURCE))
    twice = module.function("twice")  # raised a raw OSError where the CUBIN file could not be (re)written
    assert isinstance(twice, CubinKernel) and twice.cubin is module.result.cubin
    assert twice.kernel == ("function", "twice")
    assert driver.loads == [(0, module.result.cubin)]
    again = labmagic.compile_cuda(module.source).function("twice")  # the cell re-run: its module is loaded already
    assert again.kernel == ("function", "twice") and len(driver.loads) == 1
    driver.device = 1  # another device's context holds its own copy
    assert twice.kernel == ("function", "twice") and driver.loads[-1] == (1, module.result.cubin)
    assert not unwritable_cache.parent.is_dir()


def test_a_cubin_file_replaced_on_disk_after_the_check_is_never_loaded(tmp_path, monkeypatch, driver):
    monkeypatch.setenv("LABMAGIC_CACHE_DIR", str(tmp_path))
    src = _unique(SOURCE)
    first = labmagic.compile_cuda(src)
    cache.forget()
    served = labmagic.compile_cuda(src)
    assert served.result.origin == "disk"
    (tmp_path / f"{first.result.key}.cubin").write_bytes(b"another kernel altogether")
    assert served.function("twice").kernel == ("function", "twice")
    assert driver.loads == [(0, first.result.cubin)]


@pytest.mark.gpu
def test_a_kernel_launches_with_a_cache_folder_that_cannot_be_written(shell, unwritable_cache):
    shell.cell_magic("cuda_kernel", "", _unique(SOURCE))
    x = torch.arange(5, dtype=torch.float32, device="cuda")
    shell.ns["twice"](x, 5, grid=1, block=32)
    torch.testing.assert_close(x.cpu(), torch.arange(5, dtype=torch.float32) * 2)
    assert not unwritable_cache.parent.is_dir()
