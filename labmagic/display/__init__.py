"""Everything the reader sees, one module per kind of result: the compile report (:mod:`.module_report`), the compile
panel (:mod:`.panel_view`), race tables (:mod:`.race_table`) and pass/fail tables (:mod:`.verify_table`) and plots
(:mod:`.plots`), ``%ncu`` and ``%sanitize`` results (:mod:`.profile_view`, :mod:`.sanitizer_view`), and the book's
Results page and README headline (:mod:`.results_page`, in Markdown tables from :mod:`.markdown`).

Each result object's ``_repr_html_`` (JupyterLab) and ``__repr__`` (papermill logs, terminals, diffs)
delegate here, so presentation never leaks into the code that computes.
"""
