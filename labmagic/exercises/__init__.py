"""Exercises a reader is graded on, and the judge that grades them.

Each chapter's exercises sit in a notebook of their own, ``book/exercises/NN_name.ipynb`` (the chapter notebooks are
fingerprinted by their cells, so exercises never touch them). An exercise is a statement, a stub the reader fills in
(cells marked ``# exercise: NAME``, or ``// exercise: NAME`` under ``%%cuda_kernel``) and a ``%exercise NAME`` cell;
``labmagic exercise`` grades the same cells from the command line, or the solutions in ``book/solutions/``.

The data flows through these modules, in this order:

- :mod:`.spec`: what an exercise is (its inputs, reference, tolerances, speed bar, the instructions its CUDA must
  contain); :mod:`.chapters` declares the book's exercises, one module per chapter, and :mod:`.registry` finds them.
- :mod:`.submission`: the reader's cells, from a notebook file or from the live session's history.
- :mod:`.bars`: an exercise's speed bar in milliseconds, from ``results/<gpu>/ceilings.json`` or a chapter's CSV.
- :mod:`.source_rules` (what the cells may not say), :mod:`.torch_calls` (which torch operators the submission
  calls), :mod:`.kernel_trace` (on a GPU: which kernels ran, on which stream) and :mod:`.buffers` (poisoned outputs
  inside guard zones): the checks that refuse the known cheats.
- :mod:`.grading`: one submission graded in-process (in a child), into a :class:`.verdict.Grade`.
- :mod:`.judge_child` is that child; :mod:`.judge` starts it, gives every call a time limit, survives a crash or a
  hang, and adds compute-sanitizer's verdict on a GPU (:mod:`.sanitizer_pass`).

In CI (``pytest tests book --nbval-lax``) each exercise notebook runs as a reader first opens it: the stubs compile
and define their functions. A grading cell never raises (a failing stub is a grade, shown), but each one starts a
grading process (about five seconds on a CPU), so all of them carry ``nbval-skip`` except chapter 01's first, which
proves ``%exercise`` inside a real notebook kernel; tests/exercises/ grades every stub and solution in two batches.
"""
