"""A tethered chapter process dies with the process that started it (Linux), and runs its module as ``-m`` would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from labmagic.execute.tether import PARENT_ENV, tethered

PARENT = textwrap.dedent("""\
    import os, subprocess, sys
    from labmagic.execute.tether import tethered
    cmd, env = tethered([sys.executable, "-m", "sleeper", "60"], dict(os.environ))
    child = subprocess.Popen(cmd, env=env, start_new_session=True)
    print(child.pid, flush=True)
    os._exit(0)  # dies without stopping its child, as a killed Dask worker would
""")


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_the_tethered_form_runs_the_same_module_and_names_its_parent():
    cmd, env = tethered([sys.executable, "-m", "papermill", "in.ipynb", "out.ipynb"], {"A": "1"})
    assert cmd == [sys.executable, "-m", "labmagic.execute.tether", "papermill", "in.ipynb", "out.ipynb"]
    assert env == {"A": "1", PARENT_ENV: str(os.getpid())}
    with pytest.raises(ValueError, match="not a `python -m MODULE` command"):
        tethered(["papermill", "in.ipynb"], {})


def test_a_module_run_through_the_tether_gets_its_arguments_and_exit_status(tmp_path):
    (tmp_path / "echo_args.py").write_text("import sys\nprint(sys.argv[1:])\nsys.exit(3)\n")
    cmd, env = tethered([sys.executable, "-m", "echo_args", "a", "b c"], {**os.environ, "PYTHONPATH": str(tmp_path)})
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stdout.strip() == "['a', 'b c']"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_when_its_parent_dies(tmp_path):
    (tmp_path / "sleeper.py").write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", PARENT], env=env, capture_output=True, text=True, timeout=60)
    child = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the tethered child outlived its parent"
