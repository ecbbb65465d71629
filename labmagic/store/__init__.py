"""What ``results/`` holds, and the one schema every reader and writer uses: the bench CSV's columns and types
(:mod:`.schema`), rows on disk (:mod:`.bench_csv`), all of them at once (:mod:`.catalog`), the sweep's record of
each run (:mod:`.manifest`), the hash of a chapter's sources (:mod:`.fingerprint`), which rows are stale
(:mod:`.staleness`), and the benchmark scripts' side tables (:mod:`.table_csv`)."""
