"""Executing chapters: one notebook with papermill in a child process (:mod:`.papermill_run`), and many at once,
one worker per GPU, with a progress bar (:mod:`.parallel`). ``labmagic sweep`` (:mod:`labmagic.cli.sweep`) drives
them. On a Dask cluster (``sweep --scheduler``): the driver's side (:mod:`.dask_sweep`), the task a worker runs
(:mod:`.remote_chapter`) in a scratch copy of the driver's commit (:mod:`.checkout`), and what it sends back and how
the driver stores it (:mod:`.chapter_result`)."""
