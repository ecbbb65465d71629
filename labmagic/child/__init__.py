"""Running one variant of a chapter's race in a process of its own, for the tools that must launch it.

Nsight Compute and compute-sanitizer own the process they observe, so the chapter is replayed from disk in a child
(``python -m labmagic.child``): :mod:`.replay` rebuilds the race, :mod:`.worker` calls the variant,
:mod:`.protocol` is how the parent starts it and reads its answer, and :mod:`.ncu_run` / :mod:`.sanitizer_run`
wrap it in the tool and parse what the tool reports (:mod:`.ncu_report`, :mod:`.sanitizer_report`).
"""
