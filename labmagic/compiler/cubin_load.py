"""A CUBIN loaded onto the GPU from the bytes in memory (``cuModuleLoadData``, through CuPy's ``Module.load``).

The bytes are the ones the compile produced or the compile cache checked (:mod:`.cache`): nothing is written to a
file or read back from one between the check and the load, so a read-only cache folder costs only the disk copy,
and a file changed on disk after the check can never become the module that runs. A module is loaded once per
process, CUBIN and device (each device's context holds its own copy), as CuPy's ``RawModule`` does.
"""

from __future__ import annotations

_MODULES: dict[tuple[str, int], object] = {}


def load_module(key: str, cubin: bytes, device: int):
    """CuPy's ``Module`` of ``cubin`` (compile-cache key ``key``) on ``device``, the current device, loaded on first
    use."""
    module = _MODULES.get((key, device))
    if module is None:
        from cupy.cuda import function

        module = function.Module()
        module.load(bytes(cubin))
        _MODULES[(key, device)] = module
    return module


class CubinKernel:
    """One kernel of a CUBIN held in memory, with the part of CuPy's ``RawKernel`` that a launch uses: a call,
    ``kernel`` (the loaded ``Function`` on the current device) and ``max_dynamic_shared_size_bytes``."""

    def __init__(self, key: str, cubin: bytes, symbol: str):
        self.key = key
        self.cubin = cubin
        self.symbol = symbol
        self._functions: dict[int, object] = {}

    @property
    def kernel(self):
        from cupy.cuda import runtime

        device = runtime.getDevice()
        function = self._functions.get(device)
        if function is None:
            function = load_module(self.key, self.cubin, device).get_function(self.symbol)
            self._functions[device] = function
        return function

    def __call__(self, grid: tuple, block: tuple, args, shared_mem: int = 0, stream=None) -> None:
        self.kernel(grid, block, args, shared_mem=shared_mem, stream=stream)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        from cupy.cuda import driver

        return driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.kernel.ptr)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, size: int) -> None:
        from cupy.cuda import driver

        driver.funcSetAttribute(self.kernel.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, size)
