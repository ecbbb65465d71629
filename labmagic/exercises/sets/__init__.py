"""The book's exercises, one module per chapter (``c01_vector_add`` for ``01_vector_add``), each a list ``EXERCISES`` of
:class:`labmagic.exercises.spec.Exercise` in rising difficulty. What a module declares is what the statement in
``book/exercises/<chapter>.ipynb`` promises: the contract, the planted values, the bar (a test checks that every
statement quotes its bar as :func:`labmagic.exercises.bars.bar_value` computes it)."""
