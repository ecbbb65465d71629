"""How an exercise's grade looks: one verdict line, the checks that ran, and what was left ungraded, as plain text
(a terminal, a papermill log) and HTML (JupyterLab). Everything shown is escaped: it quotes the reader's code and
the compiler's messages."""

from __future__ import annotations

import html

#: Colour of the verdict line per status.
_COLOURS = {"pass": "#1b7a1b", "correct": "#1b5e9a", "compiled": "#1b5e9a", "fail": "#b00020",
            "refused": "#b00020", "not_graded": "#8a5a00"}


def speed_text(grade) -> str:
    """``0.581 ms against a bar of 0.589 ms`` (or '' when nothing was timed)."""
    if grade.ms is None:
        return ""
    text = f"{grade.ms:.4g} ms"
    if grade.bar_ms is not None:
        text += f" against a bar of {grade.bar_ms:.4g} ms"
    return text


def grade_lines(grade) -> list[str]:
    head = f"exercise {grade.exercise}"
    if grade.origin:
        head += f" ({grade.origin})"
    lines = [f"{head}: {grade.status.upper().replace('_', ' ')}: {grade.verdict}"]
    lines.extend(f"  - {check}" for check in grade.checks)
    lines.extend(f"  * {note}" for note in grade.notes)
    if grade.seed is not None:
        lines.append(f"  (cases drawn with seed {grade.seed}: --seed {grade.seed} draws them again)")
    if grade.detail:
        lines.append(grade.detail.rstrip())
    return lines


def grade_text(grade) -> str:
    return "\n".join(grade_lines(grade))


def grade_html(grade) -> str:
    first, *rest = grade_lines(grade)
    colour = _COLOURS.get(grade.status, "#000")
    body = f"<pre>{html.escape(chr(10).join(rest))}</pre>" if rest else ""
    return (f"<div class='labmagic-exercise'><p style='color:{colour};font-weight:bold'>{html.escape(first)}</p>"
            f"{body}</div>")


def summary_table(grades) -> str:
    """One line per grade, for ``labmagic exercise`` over several exercises."""
    rows = [(g.exercise, g.status, speed_text(g) or "-", g.verdict) for g in grades]
    if not rows:
        return "no exercises graded"
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)
