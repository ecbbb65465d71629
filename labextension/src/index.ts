/**
 * labmagic's JupyterLab 4 extension: CUDA highlighting for `%%cuda_kernel` cells, and chapters that open clean.
 *
 * `%%cuda_kernel` cells hold CUDA C++, but JupyterLab 4 gives every code cell the kernel's language (the
 * notebook's `language_info`), so they were highlighted as Python: `//` was no comment and an apostrophe in one
 * opened a string. The first plugin registers a CUDA language (JupyterLab's C++ from `@codemirror/lang-cpp`, plus CUDA's
 * qualifiers and a colour for built-in types), gives it to each code cell whose source starts with `%%cuda_kernel`,
 * and hands the cell back to the kernel's language when the magic line goes.
 *
 * The notebook widget sets every code cell's `mimeType` itself: when a cell widget is created, and for all cells
 * when `language_info` changes (a kernel starts or changes). Each such reset is seen on the cell model's
 * `mimeTypeChanged` and undone.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookModel, INotebookTracker, Notebook, NotebookPanel } from '@jupyterlab/notebook';
import { HighlightStyle, LanguageSupport, highlightingFor, syntaxHighlighting } from '@codemirror/language';
import { Decoration, DecorationSet, EditorView, MatchDecorator, ViewPlugin, ViewUpdate } from '@codemirror/view';
import { tags } from '@lezer/highlight';
import { JSONExt, PartialJSONObject } from '@lumino/coreutils';

/** The magic and whatever follows on its line; `%%cuda_kernel?` (help) is IPython, not CUDA. */
const MAGIC = /^%%cuda_kernel(\s|$)/;
const CUDA_MIMETYPE = 'text/x-cuda';
const CPP_MIMETYPE = 'text/x-c++src';

/** Declaration qualifiers that C++ does not know: its parser reads them as plain identifiers. */
const QUALIFIERS =
  /\b(?:__global__|__device__|__host__|__shared__|__constant__|__managed__|__grid_constant__|__restrict__|__forceinline__|__noinline__|__launch_bounds__|__cluster_dims__)\b|^%%cuda_kernel\b/g;

/** Marks CUDA's qualifiers as keywords and the magic's name as a directive, in the theme's own colours. */
const cudaWords = ViewPlugin.fromClass(
  class {
    decorations: DecorationSet;
    private matcher = new MatchDecorator({
      regexp: QUALIFIERS,
      decoration: (match, view, pos) => {
        const magic = match[0].startsWith('%%');
        if (magic && pos !== 0) {
          return null; // only the cell's first line is the magic line
        }
        const tag = magic ? tags.processingInstruction : tags.modifier;
        return Decoration.mark({ class: highlightingFor(view.state, [tag]) ?? '' });
      }
    });
    constructor(view: EditorView) {
      this.decorations = this.matcher.createDeco(view);
    }
    update(update: ViewUpdate) {
      this.decorations = this.matcher.updateDeco(update, this.decorations);
    }
  },
  { decorations: plugin => plugin.decorations }
);

/** JupyterLab's theme leaves type names uncoloured; `void`, `float`, `int` take the built-in colour here. */
const builtinTypes = syntaxHighlighting(
  HighlightStyle.define([{ tag: tags.standard(tags.typeName), color: 'var(--jp-mirror-editor-builtin-color)' }])
);

function isCuda(model: ICodeCellModel): boolean {
  return MAGIC.test(model.sharedModel.getSource());
}

class CudaCells {
  constructor(private languages: IEditorLanguageRegistry) {}

  watch(notebook: Notebook): void {
    notebook.modelChanged.connect(() => this.watchModel(notebook), this);
    this.watchModel(notebook);
  }

  private watchModel(notebook: Notebook): void {
    const model: INotebookModel | null = notebook.model;
    if (!model || this.models.has(model)) {
      return;
    }
    this.models.add(model);
    // A loaded notebook's cells arrive here too: the model is created empty and filled from the file.
    model.cells.changed.connect((_, change) => {
      if (change.type === 'add' || change.type === 'set') {
        change.newValues.forEach(cell => this.watchCell(notebook, cell));
      }
    }, this);
    for (let i = 0; i < model.cells.length; i++) {
      this.watchCell(notebook, model.cells.get(i));
    }
  }

  private watchCell(notebook: Notebook, cell: ICellModel): void {
    if (cell.type !== 'code' || this.cells.has(cell)) {
      return;
    }
    this.cells.add(cell);
    const code = cell as ICodeCellModel;
    code.sharedModel.changed.connect((_, change) => {
      if (change.sourceChange) {
        this.apply(notebook, code);
      }
    }, this);
    code.mimeTypeChanged.connect((_, change) => {
      if (change.newValue === CUDA_MIMETYPE || !isCuda(code)) {
        return;
      }
      // The editor has just asked the registry for the kernel's language; switch to CUDA once that request
      // settled, so that the kernel's language cannot land last.
      void this.languages
        .getLanguage(change.newValue)
        .catch(() => null)
        .then(() => setTimeout(() => this.apply(notebook, code), 0));
    }, this);
    this.apply(notebook, code);
  }

  private apply(notebook: Notebook, code: ICodeCellModel): void {
    if (code.isDisposed) {
      return;
    }
    if (isCuda(code)) {
      code.mimeType = CUDA_MIMETYPE; // the setter does nothing when it is already CUDA
    } else if (code.mimeType === CUDA_MIMETYPE) {
      code.mimeType = notebook.codeMimetype; // the magic line was removed: the kernel's language again
    }
  }

  private models = new WeakSet<INotebookModel>();
  private cells = new WeakSet<ICellModel>();
}

/**
 * When its kernel connects, JupyterLab writes the kernel's description into the notebook's metadata: all of
 * `language_info`, and the `kernelspec`'s display name and language. Wherever they differ from the file's (another
 * Python version than the one that executed the chapter, another display name of the same kernel), the notebook
 * turned "modified" before any edit, and closing it asked to save. A change to nothing but that description since
 * the last load or save is not an edit: the document stays clean (the description is still written with the next
 * save of a real edit). Another kernel (`kernelspec.name`) is a change the user made, and marks it modified.
 */
function withoutKernelDescription(content: PartialJSONObject): PartialJSONObject {
  const metadata = { ...((content.metadata as PartialJSONObject) ?? {}) };
  delete metadata.language_info;
  const spec = metadata.kernelspec as PartialJSONObject | undefined;
  if (spec) {
    metadata.kernelspec = { name: spec.name ?? null };
  }
  return { ...content, metadata };
}

function keepCleanOnKernelMetadata(panel: NotebookPanel): void {
  const context = panel.context;
  let saved: PartialJSONObject | null = null;
  const snapshot = () => {
    saved = withoutKernelDescription(context.model.toJSON() as PartialJSONObject);
  };
  void context.ready.then(() => {
    // Loaded and not yet connected to a kernel: the kernel starts only after the content is in the model.
    snapshot();
    context.saveState.connect((_, state) => {
      if (state === 'completed') {
        snapshot();
      }
    });
    context.model.stateChanged.connect((model, change) => {
      if (change.name !== 'dirty' || !change.newValue || saved === null) {
        return;
      }
      if (JSONExt.deepEqual(withoutKernelDescription(model.toJSON() as PartialJSONObject), saved)) {
        model.dirty = false;
      }
    });
  });
}

const cleanOpen: JupyterFrontEndPlugin<void> = {
  id: 'labmagic-jupyterlab:clean-open',
  description: "A notebook is not modified by its kernel's description of itself alone.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_: JupyterFrontEnd, tracker: INotebookTracker): void => {
    tracker.forEach(keepCleanOnKernelMetadata);
    tracker.widgetAdded.connect((_, panel) => keepCleanOnKernelMetadata(panel));
  }
};

const cudaHighlight: JupyterFrontEndPlugin<void> = {
  id: 'labmagic-jupyterlab:cuda-highlight',
  description: 'Highlights %%cuda_kernel cells (and .cu files) as CUDA C++.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  activate: (_: JupyterFrontEnd, tracker: INotebookTracker, languages: IEditorLanguageRegistry): void => {
    languages.addLanguage({
      name: 'CUDA',
      displayName: 'CUDA C++',
      mime: CUDA_MIMETYPE,
      extensions: ['cu', 'cuh'],
      async load() {
        const cpp = await languages.getLanguage(CPP_MIMETYPE);
        if (!cpp?.support) {
          throw new Error(`no C++ language (${CPP_MIMETYPE}) in the editor language registry`);
        }
        return new LanguageSupport(cpp.support.language, [cpp.support, cudaWords, builtinTypes]);
      }
    });
    const cells = new CudaCells(languages);
    tracker.forEach(panel => cells.watch(panel.content));
    tracker.widgetAdded.connect((_, panel) => cells.watch(panel.content));
  }
};

export default [cudaHighlight, cleanOpen];
