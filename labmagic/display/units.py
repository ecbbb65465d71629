"""Number formats shared by the renderers."""

from __future__ import annotations


def small_bytes(n: int) -> str:
    """Shared-memory and stack sizes: bytes below 10 KiB, KiB above."""
    return f"{n} B" if n < 10 * 1024 else f"{n / 1024:.1f} KiB"
