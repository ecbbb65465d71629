"""The scripts in examples/ run as a reader runs them: a fresh process, the book's kernels through labmagic.kernel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_attention_example_checks_chapter_07s_kernel_against_fp64():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "attention.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = re.findall(r"^triton_flash +\S+ causal=(True|False) +worst \|err\| / tol: O ([0-9.]+), lse ([0-9.]+)  ok$",
                      done.stdout, re.M)
    assert len(rows) == 4 and {r[0] for r in rows} == {"True", "False"}, done.stdout
    assert all(0 < float(o) <= 1 for _, o, _ in rows), rows  # a real bf16 error: nonzero, within tolerance
    assert done.stdout.rstrip().endswith("1 kernel(s), 0 mismatch(es)")
