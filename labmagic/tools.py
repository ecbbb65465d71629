"""Finding the CUDA command-line tools: one search, two kinds of tool.

Binary utilities that ship as pip wheels (``nvdisasm``, ``cuobjdump``) are looked up through
cuda-pathfinder first; the Nsight tools (``ncu``, ``compute-sanitizer``) come with a toolkit or an
Nsight install and can be pointed at with an environment variable. Both then fall back to the same
places: PATH, a toolkit under ``CUDA_HOME``/``CUDA_PATH``/``/usr/local/cuda``, versioned toolkits and
Nsight Compute folders.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from .errors import ToolMissingError


def _candidates(name: str):
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            yield Path(home) / "bin" / name
            yield Path(home) / "compute-sanitizer" / name
    yield from sorted(Path("/opt/nvidia").glob(f"nsight-compute/*/{name}"), reverse=True)
    yield from sorted(Path("/usr/local").glob(f"cuda-*/bin/{name}"), reverse=True)


def locate(name: str) -> str | None:
    """PATH, then the toolkit folders; None when the tool is nowhere."""
    found = shutil.which(name)
    if found:
        return found
    for candidate in _candidates(name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@functools.cache
def find_tool(name: str) -> str:
    """A CUDA binary utility (``nvdisasm``, ``cuobjdump``): the pip wheel first, then :func:`locate`."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility(name)
        if found:
            return str(found)
    except Exception:  # pathfinder missing, or it cannot place the tool: try the usual places
        pass
    found = locate(name)
    if found:
        return found
    raise ToolMissingError(
        f"{name} not found: `pip install nvidia-cuda-{name}` (CUDA 13; `-cu12` for CUDA 12) or install a CUDA toolkit"
    )


def find_nsight_tool(name: str, env: str) -> str:
    """``ncu`` / ``compute-sanitizer``: ``$ENV`` first, then :func:`locate` (not cached: env may change)."""
    if os.environ.get(env):
        return os.environ[env]
    found = locate(name)
    if found:
        return found
    raise ToolMissingError(
        f"{name} not found: install Nsight Compute / the CUDA toolkit (it ships {name}), put it on PATH, "
        f"or set {env}=/path/to/{name}"
    )
