"""A real full disk for the tests of what a failed write leaves behind: a small tmpfs mounted on a folder, and a
filler file that takes all of its space but what a test leaves free."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, size: str = "4m"):
    """A tmpfs of ``size`` mounted on ``folder`` (made first) for the duration; skips the test where this machine
    does not let it mount one (mounting takes root, or CAP_SYS_ADMIN)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs for a full disk here: {exc}")
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs for a full disk here: {done.stderr.strip() or done.returncode} "
                    "(needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True, timeout=30)


def fill(folder: Path, leave: int = 0) -> Path:
    """Take all the free space of ``folder``'s file system but ``leave`` bytes, with one filler file."""
    stat = os.statvfs(folder)
    filler = folder / "filler"
    filler.write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))
    return filler


def files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` but the filler, hidden ones (temporaries) included: name -> bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != "filler"}
