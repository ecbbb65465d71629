"""What a submission's Python may not say, read from its source before anything runs.

:mod:`.torch_calls` sees torch's operators as they run; these rules cover what it cannot see:

- another library that computes: ``numpy``, ``cupy``, ``jax``, ``scipy`` (numpy on a tensor's host copy leaves no
  trace in torch's dispatcher), or one that reaches the CUDA runtime or driver directly (``cuda`` of cuda-python,
  ``pycuda``, ``ctypes``): a ``cudaMemcpyAsync`` of the input into the output is a copy, not the exercise's kernel;
- the chapter's own kernels (``labmagic.kernel(...)``) and the judge's modules (``labmagic.exercises``), that is,
  the reference or the solution;
- a copy to the host (``.cpu()``, ``.numpy()``, ``.tolist()``, ``.item()``): the result would not come from the GPU
  kernel being graded;
- code built at run time (``exec``, ``eval``, ``compile``, ``__import__``, ``importlib``), which would hide all of the
  above from these rules.

Limits: the rules read the marked cells' Python, not the CUDA in ``%%cuda_kernel`` cells (NVRTC links nothing, so
CUDA C cannot call a library) and not strings that are only data. They are a judge for readers, not a sandbox.
"""

from __future__ import annotations

import ast

#: Modules whose import is refused, with what importing them means.
FORBIDDEN_MODULES = {
    "numpy": "another library (numpy)", "cupy": "another library (CuPy)", "jax": "another library (JAX)",
    "scipy": "another library (SciPy)", "importlib": "code loaded at run time (importlib)",
    "ctypes": "a library called through ctypes",
    "cuda": "the CUDA runtime or driver called directly (cuda-python): copies and launches the judge cannot trace",
    "pycuda": "the CUDA driver called directly (PyCUDA)",
}
#: Attributes whose use is refused (method calls on tensors, mostly).
FORBIDDEN_ATTRIBUTES = {
    "cpu": "a copy to the host (.cpu())", "numpy": "a copy to the host (.numpy())",
    "tolist": "a copy to the host (.tolist())", "item": "a copy to the host (.item())",
}
#: Builtins that build code at run time.
FORBIDDEN_BUILTINS = {"exec", "eval", "compile", "__import__"}


def violations(python_source: str, cell_label: str) -> list[str]:
    """Each rule the Python source breaks, as ``cell 2, line 3: imports numpy: another library (numpy)``."""
    try:
        tree = ast.parse(python_source)
    except SyntaxError:
        return []  # the grader reports a syntax error when it runs the cell
    found = []
    for node in ast.walk(tree):
        where = f"{cell_label}, line {getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in FORBIDDEN_MODULES:
                    found.append(f"{where}: imports {name}: {FORBIDDEN_MODULES[root]}")
                elif name.startswith("labmagic.exercises") or (
                        isinstance(node, ast.ImportFrom) and name == "labmagic"
                        and any(a.name in ("exercises", "kernel") for a in node.names)):
                    found.append(f"{where}: imports the judge or the chapter's kernels ({name})")
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append(f"{where}: uses .{node.attr}: {FORBIDDEN_ATTRIBUTES[node.attr]}")
            elif node.attr in ("kernel", "exercises") and _is_name(node.value, "labmagic"):
                found.append(f"{where}: uses labmagic.{node.attr}: the chapter's own kernels or the judge")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            found.append(f"{where}: uses {node.id}(): code built at run time")
    return sorted(dict.fromkeys(found))


def _is_name(node, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
