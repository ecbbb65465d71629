"""Extracting a commit for a worker (:func:`labmagic.execute.checkout.materialise`)."""

from __future__ import annotations

import os
import shutil

from labmagic.execute.checkout import Commit, materialise


def test_git_archive_is_read_to_its_end_so_trailing_padding_never_kills_it(tmp_path, monkeypatch, git_commit):
    """tarfile stops at the end-of-archive blocks; git may write the rest of the record after them. A ``git`` that
    writes more zeros half a second after its archive fails (SIGPIPE) if the reader has closed the pipe by then: the
    cluster sweep's intermittent "git archive ... failed: ?"."""
    repo = tmp_path / "repo"
    (repo / "book").mkdir(parents=True)
    (repo / "book" / "01_a.md").write_text("# A\n")
    sha = git_commit(repo, "one file")
    real_git = shutil.which("git")
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/bash\nif [ "$1" = archive ]; then\n  "{real_git}" "$@" || exit $?\n  sleep 0.5\n'
                    '  head -c 10240 /dev/zero\n  exit $?\nfi\nexec "' + real_git + '" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    dest = materialise(Commit(sha, "", str(repo)), repo, tmp_path / "out", results_of="cpu")
    assert (dest / "book" / "01_a.md").read_text() == "# A\n"
