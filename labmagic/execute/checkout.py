"""The commit a sweep on a Dask cluster runs, and a scratch copy of it on a worker.

The driver names its ``HEAD`` (:func:`driver_commit`); each worker extracts that commit from a clone it can reach
into a scratch folder (:func:`materialise`) and runs the chapter there, so every kind of GPU runs the same sources
whatever its host's checkout holds. Uncommitted changes under ``book/`` or ``labmagic/`` would not reach the
workers, so the driver refuses them unless told to sweep the commit as it is.
"""

from __future__ import annotations

import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError

#: What a chapter run depends on: changes here that are not committed would not reach the workers.
WATCHED = ("book", "labmagic")


@dataclass(frozen=True)
class Commit:
    """The driver's ``HEAD``: its sha, the checkout's folder within the repository (``""`` at its top), the
    checkout's path on the driver's host (a worker on a shared file system can read it), and the uncommitted
    changes that the sweep leaves out (with ``--allow-dirty``)."""

    sha: str
    prefix: str
    path: str
    left_out: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        return self.sha[:12]


def _git(args: list[str], cwd: Path | str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise LabError("git is not installed: a sweep on a cluster ships a git commit to its workers") from None


def driver_commit(root: Path, *, allow_dirty: bool = False) -> Commit:
    """``HEAD`` of the checkout at ``root``; a one-line error when there is none, or when ``book/`` or
    ``labmagic/`` have uncommitted changes (untracked files included) and ``allow_dirty`` is false."""
    head = _git(["rev-parse", "HEAD"], root)
    if head.returncode != 0:
        why = (head.stderr.strip().splitlines() or ["no commit"])[-1]
        raise LabError(f"--scheduler runs chapters at the driver's git commit, and {root} has none ({why})")
    prefix = _git(["rev-parse", "--show-prefix"], root).stdout.strip().rstrip("/")
    status = _git(["status", "--porcelain", "--", *WATCHED], root)
    changed = tuple(line[3:] for line in status.stdout.splitlines() if line.strip())
    sha = head.stdout.strip()
    if changed and not allow_dirty:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise LabError(f"uncommitted changes under book/ or labmagic/ ({shown}) would not reach the workers, which "
                       f"run commit {sha[:12]}: commit them, or pass --allow-dirty to sweep that commit as it is")
    return Commit(sha, prefix, str(root), changed)


def has_commit(repo: Path | str, sha: str) -> bool:
    return _git(["cat-file", "-e", f"{sha}^{{commit}}"], repo).returncode == 0


def find_clone(sha: str, candidates: list[Path | str]) -> Path:
    """The first of ``candidates`` that is a git clone holding commit ``sha``."""
    seen = []
    for candidate in candidates:
        path = Path(candidate)
        if str(path) in seen:
            continue
        seen.append(str(path))
        if path.is_dir() and has_commit(path, sha):
            return path
    raise LabError(f"no clone here holds commit {sha[:12]} (looked in {', '.join(seen) or 'nothing'}): fetch it "
                   "into the worker's checkout (LABMAGIC_ROOT), or start the worker where the driver's is visible")


def materialise(commit: Commit, clone: Path, dest: Path, *, results_of: str) -> Path:
    """Extract ``commit`` (its checkout's folder) from ``clone`` into ``dest``; of ``results/``, only the folder of
    GPU ``results_of`` (ceilings and earlier rows a chapter may read). Returns ``dest``."""
    tree = f"{commit.sha}:{commit.prefix}" if commit.prefix else commit.sha
    dest.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["git", "archive", "--format=tar", tree], cwd=str(clone), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            for member in archive:
                if member.name.startswith("results/") and not member.name.startswith(f"results/{results_of}/"):
                    continue  # other GPUs' results: nothing a chapter here reads
                if hasattr(tarfile, "data_filter"):
                    archive.extract(member, dest, filter="data")
                else:  # pragma: no cover - Python before 3.10.12
                    archive.extract(member, dest)
        # tarfile stops at the end-of-archive blocks; git may still be writing the record's padding after them.
        # Closing the pipe now would kill it with SIGPIPE (a failure with nothing on stderr), so read to the end.
        while proc.stdout.read(1 << 16):
            pass
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        code = proc.wait()
    if code != 0:
        why = (err.strip().splitlines() or [f"killed by signal {-code}" if code < 0 else f"exit status {code}"])[-1]
        raise LabError(f"git archive {tree[:20]} in {clone} failed: {why}")
    return dest
