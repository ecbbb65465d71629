"""Opening a chapter in JupyterLab does not mark it modified.

It did: when a notebook's kernel connects, JupyterLab writes the kernel's ``kernelspec`` and ``language_info`` into
the notebook's metadata, and the chapters' differed from any reader's (``display_name`` "Python 3" against
ipykernel's "Python 3 (ipykernel)", and the Python version of the sweep that executed them). The sweep now writes
the kernelspec JupyterLab writes (``normalise_kernel_metadata``), and labmagic's JupyterLab extension does not
count the kernel's description of itself (``language_info``, the kernelspec's display name and language) as an
edit. Anything else that JupyterLab normalises on load (cell ids, nbformat minor version, outputs) would still
show here. The chapters are copies: book/ is never touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labmagic.execute.papermill_run import normalise_kernel_metadata

BOOK = Path(__file__).resolve().parents[2] / "book"
CHAPTERS = sorted(BOOK.glob("*.ipynb"))

#: Once the kernel connected and JupyterLab wrote its metadata: whether the document is dirty, by the model and by
#: the tab's mark, and the metadata keys whose values differ from the file's (the evidence when it is dirty).
STATE_JS = """(async () => {
  // JSON with keys sorted at every level: a chapter whose stored language_info already equals the kernel's (run with
  // this very Python) keeps the file's key order, which JupyterLab sees as equal and never rewrites
  const canon = o => JSON.stringify(o, (k, v) => v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.keys(v).sort().map(key => [key, v[key]])) : v);
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel) return null;
  const info = (await kernel.info).language_info;
  const model = panel.context.model;
  if (canon(model.getMetadata('language_info')) !== canon(info)) return null;  // not written yet
  if (!model.getMetadata('kernelspec') || model.getMetadata('kernelspec').name !== kernel.name) return null;
  const disk = (await window.jupyterapp.serviceManager.contents.get(panel.context.path, {content: true})).content;
  const now = model.toJSON().metadata;
  const changed = Object.keys({...now, ...disk.metadata}).filter(
      key => JSON.stringify(now[key]) !== JSON.stringify(disk.metadata[key]));
  const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')].find(
      t => t.textContent.trim() === panel.title.label);
  return {dirty: model.dirty, tabDirty: !!tab && tab.classList.contains('jp-mod-dirty'), changed,
          model: changed.map(key => [key, now[key]]), disk: changed.map(key => [key, disk.metadata[key]])};
})()"""

CLOSE_JS = """(async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.sessionContext.shutdown();
  panel.context.model.dirty = false;  // closes without the save prompt
  panel.dispose();
  return true;
})()"""


def _opened(lab, chapter: Path) -> dict:
    path = f"book/{chapter.name}"
    (lab.root / "book").mkdir(exist_ok=True)
    shutil.copyfile(chapter, lab.root / path)
    lab.open_notebook(path)
    state = lab.wait(STATE_JS, what=f"{chapter.stem}'s kernel to connect", timeout=40)
    lab.page.evaluate("new Promise(resolve => setTimeout(() => resolve(true), 300))")  # late metadata writes
    return lab.page.evaluate(STATE_JS) or state


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_opening_a_chapter_does_not_mark_it_modified(lab, chapter):
    state = _opened(lab, chapter)
    try:
        print(f"{chapter.stem}: metadata JupyterLab rewrote: {state['changed']}")
        assert not state["dirty"] and not state["tabDirty"], (
            f"{chapter.stem} is modified right after opening; metadata now {state['model']}, "
            f"in the file {state['disk']}")
    finally:
        lab.page.evaluate(CLOSE_JS)


#: Changes to the open chapter that must still mark it modified: the extension forgives the kernel's description
#: (display name, language, language_info), not an edit, and not another kernel (the user's choice, to be saved).
STILL_MODIFIED = {
    "an edit": "(() => { const cell = window.jupyterapp.shell.currentWidget.content.widgets[0];"
               " cell.model.sharedModel.setSource(cell.model.sharedModel.getSource() + ' '); return true; })()",
    "another kernel": "(() => { const model = window.jupyterapp.shell.currentWidget.context.model;"
                      " model.setMetadata('kernelspec', {...model.getMetadata('kernelspec'), name: 'another'});"
                      " return true; })()",
}


@pytest.mark.slow
@pytest.mark.parametrize("change", STILL_MODIFIED, ids=lambda change: change.replace(" ", "_"))
def test_a_real_change_still_marks_a_chapter_modified(lab, change):
    state = _opened(lab, CHAPTERS[0])
    try:
        assert not state["dirty"]
        lab.page.evaluate(STILL_MODIFIED[change])
        lab.wait("window.jupyterapp.shell.currentWidget.context.model.dirty", what=f"{change} to mark it modified")
    finally:
        lab.page.evaluate(CLOSE_JS)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapters_carry_the_kernelspec_jupyterlab_writes(chapter):
    """Without the extension too (JupyterLab elsewhere, Notebook 7 without labmagic), the installed kernel spec's
    display name is what JupyterLab writes: the chapter must already carry it."""
    pytest.importorskip("jupyter_client", reason="no jupyter_client: no installed kernel spec to compare with")
    stored = json.loads(chapter.read_text(encoding="utf-8"))
    expected = normalise_kernel_metadata(json.loads(chapter.read_text(encoding="utf-8")))
    assert stored["metadata"]["kernelspec"] == expected["metadata"]["kernelspec"], (
        "re-write the chapter with labmagic.execute.papermill_run.normalise_kernel_metadata (a sweep does)")
