"""Directives of one kernel in a module's PTX: its ``.entry`` block, ``__launch_bounds__`` (``.maxntid``) and
``__cluster_dims__`` (``.reqnctapercluster``). What NVRTC compiled, read back without a GPU."""

from __future__ import annotations

import re


def kernel_ptx(ptx: str | None, symbol: str) -> str | None:
    """The ``.entry symbol`` block of a module's PTX (from ``.entry`` to its closing brace)."""
    if not ptx:
        return None
    start = re.search(rf"^\.(?:visible|weak)?\s*\.entry\s+{re.escape(symbol)}\s*\(", ptx, re.M)
    if not start:
        start = re.search(rf"\.entry\s+{re.escape(symbol)}\s*\(", ptx)
    if not start:
        return None
    depth, i, opened = 0, start.start(), False
    while i < len(ptx):
        ch = ptx[i]
        if ch == "{":
            depth += 1
            opened = True
        elif ch == "}":
            depth -= 1
            if opened and depth == 0:
                return ptx[start.start():i + 1]
        i += 1
    return ptx[start.start():]


def launch_bounds(ptx: str | None, symbol: str) -> int | None:
    """Threads per block the kernel declared with ``__launch_bounds__`` (PTX ``.maxntid``), if any."""
    body = kernel_ptx(ptx, symbol)
    if not body:
        return None
    m = re.search(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", body)
    if not m:
        return None
    n = 1
    for g in m.groups():
        if g:
            n *= int(g)
    return n


def cluster_dims(ptx: str | None, symbol: str) -> tuple[int, int, int] | None:
    """The thread-block cluster shape fixed at compile time (``__cluster_dims__``, PTX ``.reqnctapercluster``),
    or None: a launch's grid must be a whole number of such clusters. Only the entry's header (up to its body's
    opening brace) is searched, by one regex."""
    m = ptx and re.search(rf"\.entry\s+{re.escape(symbol)}\s*\([^{{]*?\.reqnctapercluster\s+(\d+)\s*,\s*(\d+)\s*,"
                          r"\s*(\d+)", ptx)
    return tuple(int(g) for g in m.groups()) if m else None
