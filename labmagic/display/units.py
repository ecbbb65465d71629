"""Number formats shared by the renderers."""

from __future__ import annotations

import math


def small_bytes(n: int) -> str:
    """Shared-memory and stack sizes: bytes below 10 KiB, KiB above."""
    return f"{n} B" if n < 10 * 1024 else f"{n / 1024:.1f} KiB"


def cell_number(value) -> float | None:
    """A CSV cell as a float; None for an empty or unreadable cell (NaN)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value
