"""Fixtures of the sweep's tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sitebuild import scratch_checkout, write_chapter


@pytest.fixture
def tiny_repo(tmp_path, monkeypatch):
    """A scratch checkout with three tiny chapters: two that pass and one that fails on purpose."""
    root = scratch_checkout(tmp_path / "repo", with_chapters=False)
    book = root / "book"
    write_chapter(book / "01_alpha.ipynb", 'print(f"alpha size={size}")', title="Alpha")
    write_chapter(book / "02_beta.ipynb", 'print("beta starts")', 'raise ValueError("beta is broken on purpose")',
                  title="Beta")
    write_chapter(book / "03_gamma.ipynb", "print('gamma', sum(range(10)))", title="Gamma")
    monkeypatch.setenv("LABMAGIC_ROOT", str(root))
    monkeypatch.setenv("LABMAGIC_FORCE_CPU", "1")
    monkeypatch.delenv("LABMAGIC_BOOK_GPU", raising=False)
    return root


#: A chapter cell that writes two bench rows and a plot for its chapter, as a race does.
ROWS_CELL = '''from labmagic.paths import atomic_write
from labmagic.store.bench_csv import bench_csv_path, write_rows
rows = [dict(chapter="{chapter}", variant=v, backend="torch", shape="64", dtype="float32", status="ok", ms_median=0.1)
        for v in ("torch_ref", "torch_twice")]
write_rows(bench_csv_path("{chapter}"), rows)
atomic_write(bench_csv_path("{chapter}").with_suffix(".png"), b"a plot of {chapter}")
print("{chapter} wrote", len(rows), "rows")'''


def commit_all(root: Path, message: str = "chapters") -> str:
    """``git add -A && git commit`` in ``root`` (made a repository first if it is not one); the new HEAD."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()

    if not (root / ".git").exists():
        git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=Kernel Lab tests", "-c", "user.email=tests@example.invalid", "commit", "-qm", message)
    return git("rev-parse", "HEAD")


@pytest.fixture
def cluster_repo(tiny_repo):
    """``tiny_repo`` as a git repository, its two passing chapters also writing bench rows and a plot, committed:
    what a sweep on a Dask cluster ships to its workers."""
    book = tiny_repo / "book"
    write_chapter(book / "01_alpha.ipynb", 'print(f"alpha size={size}")', ROWS_CELL.format(chapter="01_alpha"),
                  title="Alpha")
    write_chapter(book / "03_gamma.ipynb", "print('gamma', sum(range(10)))", ROWS_CELL.format(chapter="03_gamma"),
                  title="Gamma")
    commit_all(tiny_repo)
    return tiny_repo


@pytest.fixture(scope="module")
def dask_scheduler(tmp_path_factory):
    """The address of a LocalCluster with two CPU worker processes (kind ``cpu``), shared by a module's tests."""
    from labmagic.execute.dask_sweep import local_cluster

    with local_cluster(2, local_directory=str(tmp_path_factory.mktemp("dask"))) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def git_commit():
    """:func:`commit_all`, for tests that commit more chapters."""
    return commit_all
