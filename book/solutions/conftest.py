"""The solutions are graded by the judge (``labmagic exercise --solution``, tests/exercises/), not executed as
notebooks: nbval collects nothing here."""

collect_ignore_glob = ["*"]
