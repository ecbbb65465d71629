"""Executing chapters: one notebook with papermill in a child process (:mod:`.papermill_run`), and many at once,
one worker per GPU, with a progress bar (:mod:`.parallel`). ``labmagic sweep`` (:mod:`labmagic.cli.sweep`) drives
them."""
