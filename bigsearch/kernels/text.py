"""Documents' sparse TF-IDF rows times the text model's dense projection (ingest/text.py)."""

import numba

from .common import FAST


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def project_documents(indptr, columns, values, components, out):
    """out[i] += sum over document i's terms t (columns[t] >= 0) of values[t] * components[columns[t]]:
    each document's row of out stays in cache while its terms' rows of components (float32,
    widened) are added in the order of its terms, so a row's value does not depend on its
    block. SciPy's sparse product widened the whole float32 projection to float64 on every
    call (hundreds of MB a block of 2,000 documents) and added one column at a time."""
    for i in range(len(indptr) - 1):
        row = out[i]
        for t in range(indptr[i], indptr[i + 1]):
            c = columns[t]
            if c < 0:
                continue
            v = values[t]
            comp = components[c]
            for j in range(row.shape[0]):
                row[j] += v * comp[j]
