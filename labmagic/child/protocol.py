"""Talking to a child: the command that starts ``python -m labmagic.child``, its environment, and the one
JSON record it prints last (``LABMAGIC-CHILD {...}``), which the parent reads back.

The parent side lives here; the child side is :mod:`labmagic.child.worker`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..errors import LabError

#: Prefix of the child's record line on stdout.
MARKER = "LABMAGIC-CHILD "


def child_command(chapter: str, variant: str, shape: str | None, mode: str, iters: int = 1,
                  params: dict | None = None) -> list[str]:
    """``python -m labmagic.child ...``; a notebook path is made absolute (the child runs at the repo root)."""
    if str(chapter).endswith(".ipynb"):
        chapter = str(Path(chapter).resolve())
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--variant", variant,
           "--mode", mode, "--iters", str(iters)]
    if shape:
        cmd += ["--shape", *str(shape).split()]
    for name, value in (params or {}).items():  # VALUE as typed; the child reads it as a Python literal
        cmd += ["-p", f"{name}={value}"]
    return cmd


def child_record(output: str) -> dict:
    """The child's last ``LABMAGIC-CHILD {json}`` line, or {} when it died before writing one."""
    for line in reversed(output.splitlines()):
        idx = line.find(MARKER)
        if idx >= 0:
            try:
                return json.loads(line[idx + len(MARKER):])
            except ValueError:
                return {}
    return {}


def child_env(**extra: str) -> dict:
    """The child's environment: this labmagic importable whatever the working directory."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def log_tail(log: str, lines: int = 30) -> str:
    """The last lines of a tool's output, for an error's detail."""
    return "\n".join(log.strip().splitlines()[-lines:])


def list_variants(chapter: str, params: dict | None = None) -> dict:
    """The race's variants and shapes, asked of a child (so the CLI never imports the chapter itself)."""
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--mode", "list"]
    for name, value in (params or {}).items():
        cmd += ["-p", f"{name}={value}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    record = child_record(proc.stdout)
    if not record or record.get("ok") is False:
        raise LabError(f"could not load chapter {chapter!r}: {record.get('error', 'no answer from the child')}",
                       detail=log_tail(proc.stderr))
    return record
