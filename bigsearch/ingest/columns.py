"""Reading columns out of a block: numbers as float64, text as trimmed strings.

The lowest layer of ingest: featurize, stats and labels all read blocks through these
two functions (and import nothing from each other in a circle).
"""

import numpy as np

from ..errors import InputError


def numeric_matrix(block, indices):
    """The block's columns ``indices`` as float64 (m, k); missing, NaN or infinite values
    are an error naming the line and the column."""
    if block.matrix is not None:
        m = block.matrix
        if list(indices) != list(range(m.shape[1])):
            m = m[:, indices]
        X = np.asarray(m.toarray() if hasattr(m, "toarray") else m, dtype=np.float64)
    else:
        X = np.empty((len(block), len(indices)), np.float64)
        for i, j in enumerate(indices):
            X[:, i] = block.table.column(j).to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        name = block.reader.columns[indices[col]].name
        raise InputError(
            f"{block.where(int(row))}: column {indices[col]} ({name}) is "
            f"{'missing or NaN' if np.isnan(X[row, col]) else 'infinite'}; "
            "features must be finite numbers"
        )
    return X


def text_values(block, j):
    """Column j as a pyarrow string array with surrounding spaces removed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = block.table.column(j) if block.table is not None else pa.array(block.column(j))
    if not pa.types.is_string(col.type) and not pa.types.is_large_string(col.type):
        return pc.cast(col, pa.string())
    return pc.utf8_trim_whitespace(col)
