"""Everything the reader sees: one module per kind of result (compile report, bench tables, panels).

Each result object's ``_repr_html_`` (JupyterLab) and ``__repr__`` (papermill logs, terminals, diffs)
delegate here, so presentation never leaks into the code that computes.
"""
