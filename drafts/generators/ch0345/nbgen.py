import nbformat

def new_nb():
    nb = nbformat.v4.new_notebook()
    nb.metadata = {'kernelspec': {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'},
                   'language_info': {'name': 'python'}}
    return nb

def md(nb, text):
    nb.cells.append(nbformat.v4.new_markdown_cell(text.strip('\n')))

def code(nb, text, tags=None):
    c = nbformat.v4.new_code_cell(text.strip('\n'))
    if tags:
        c.metadata['tags'] = tags
    nb.cells.append(c)

def cuda(nb, src, line=''):
    code(nb, ('%%cuda_kernel ' + line).rstrip() + '\n' + src.strip('\n'))

def save(nb, path):
    for i, c in enumerate(nb.cells):
        c['id'] = f'cell-{i:02d}'
    nbformat.validate(nb)
    nbformat.write(nb, path)

import os

#: KL_KERNELS=bak builds the chapters with the kernels validated on the H200 before the load batching
#: (bak/*.cu beside this file): the fallback if the batched kernels fail their correctness cells.
BAK = os.environ.get('KL_KERNELS') == 'bak'

def cu(path):
    bak = os.path.join(os.path.dirname(path), 'bak', os.path.basename(path))
    if BAK and os.path.exists(bak):
        path = bak
    return open(path).read()
