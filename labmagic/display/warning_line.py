"""Python warnings in a notebook, as one line each: category, module, message; never the file's path.

Python's own format is ``/abs/path/to/site-packages/torch/_inductor/lowering.py:7836: UserWarning: ...`` followed by
the warning's source line: the path says where the library is installed on the machine that ran the chapter, which
is noise for a reader and, in an executed notebook that is published, a leak of that machine's layout. Once
``%load_ext labmagic`` runs in a kernel, a warning reads::

    UserWarning (torch._inductor.lowering): Online softmax is disabled on the fly since Inductor decides to ...

and a warning already shown in this kernel (same category, module and message) is not shown again: a library that
resets the warnings registry (every ``warnings.catch_warnings`` does) would otherwise repeat it on every call.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import PurePath

#: Folders below which a file's path spells its module (``.../site-packages/torch/cuda/__init__.py``).
_PACKAGE_ROOTS = ("site-packages", "dist-packages")


def module_of(filename: str) -> str:
    """The dotted module a warning's file belongs to: the loaded module with that file, else the path below an
    installation folder, else the file's own name; never a path."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name
    parts = PurePath(filename).parts
    for root in _PACKAGE_ROOTS:
        if root in parts:
            below = list(parts[len(parts) - parts[::-1].index(root):])
            if below:
                below[-1] = PurePath(below[-1]).stem
                if below[-1] == "__init__":
                    below.pop()
                return ".".join(below) or PurePath(filename).stem
    return PurePath(filename).stem or "?"


def one_line(message, category, filename: str) -> str:
    """``Category (module): message``, the message's whitespace (its line breaks too) collapsed to single spaces."""
    text = re.sub(r"\s+", " ", str(message)).strip()
    return f"{category.__name__} ({module_of(filename)}): {text}"


class WarningLines:
    """A ``warnings.showwarning`` that writes :func:`one_line` to stderr (or the file given), each distinct warning
    once."""

    def __init__(self):
        self.seen: set[tuple[str, str]] = set()

    def __call__(self, message, category, filename, lineno, file=None, line=None):
        text = one_line(message, category, filename)
        key = (category.__name__, text)
        if key in self.seen:
            return
        self.seen.add(key)
        stream = file if file is not None else sys.stderr
        if stream is None:  # pythonw and friends: nowhere to write
            return
        try:
            stream.write(text + "\n")
        except OSError:  # as Python's own: a closed stream loses the warning, not the program
            pass


def install() -> WarningLines:
    """Show warnings as one line from now on in this process (idempotent); the hook installed."""
    if not isinstance(warnings.showwarning, WarningLines):
        warnings.showwarning = WarningLines()
    return warnings.showwarning
