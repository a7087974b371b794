"""Reading columns out of a block: numbers as float64, text as trimmed strings.

The lowest layer of ingest: featurize, stats and labels all read blocks through these
two functions (and import nothing from each other in a circle). Column references
(names, or 0-based indices) resolve here, for ingest and for `run --scores FILE:COLUMN`.
"""

import numpy as np

from ..errors import InputError


def numeric_matrix(block, indices, what="features"):
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
            f"{what} must be finite numbers"
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


# What a database writes in a field it has no text for (Scopus: "[No abstract available]"):
# read as empty, so the record keeps its title alone, as one without an abstract does, and
# the records without one do not look alike by these three words.
NO_TEXT = r"(?i)^\W*(no abstract( is)? available|abstract( is)? not available)\W*$"


def documents(block, indices, weights=()):
    """The documents of a block (ingest/text.py): its text columns ``indices`` joined by a
    space, each ``weights[k]`` times (its words count that many times: the title three
    times by default, ingest/pipeline.py); a missing value, or a placeholder for one
    (NO_TEXT), reads as empty, so a record without an abstract keeps its title."""
    import pyarrow as pa
    import pyarrow.compute as pc

    times = weights or (1,) * len(indices)
    parts = [text for j, w in zip(indices, times) for text in [document_text(block, j)] * w]
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, pa.scalar(" "))


def document_text(block, j):
    """Text column j as a document's part: missing values and placeholders empty."""
    import pyarrow.compute as pc

    text = pc.fill_null(text_values(block, j), "")
    placeholder = pc.match_substring_regex(text, NO_TEXT)
    return pc.if_else(placeholder, "", text) if pc.any(placeholder).as_py() else text


def resolve_columns(reader, refs, option):
    """Column references (names, or 0-based indices when numeric) -> indices. A name no
    column has, but that names a document role (ingest/documents.py: title, abstract,
    keywords, label, ...), is the column playing that role."""
    from .documents import role_column

    names = [c.name for c in reader.columns]
    out = []
    for ref in refs:
        ref = str(ref).strip()
        if ref in names:
            out.append(names.index(ref))
        elif ref.lstrip("-").isdigit():
            j = int(ref)
            if not 0 <= j < len(names):
                raise InputError(
                    f"{reader.path}: {option} {ref} is out of range: the input has "
                    f"{len(names)} columns (0..{len(names) - 1})"
                )
            out.append(j)
        elif (playing := role_column(names, ref)) is not None:
            out.append(names.index(playing))
        else:
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            other_case = [n for n in names if n.lower() == ref.lower()]
            if other_case:
                hint = f"; names are matched as written: did you mean {other_case[0]!r}?"
            elif getattr(reader, "header", None) is False:
                # a text cell in a column of numbers makes the header look like data
                hint = (
                    "; the first line was read as data, not as a header: if it names the columns, "
                    "say so with source.header=True (or does a column of numbers hold text?)"
                )
            else:
                hint = ""
            raise InputError(f"{reader.path}: {option} {ref!r}: no such column (columns: {shown}){hint}")
    return out


def numeric_column(path, ref, option, what="values"):
    """Column ``ref`` (a name, or a 0-based index) of a tabular input that ingest reads
    (CSV, TSV, Parquet, ...; gzip too) as a float64 vector. A column of text, or a
    missing, NaN or infinite value, is an error naming the file (and the line)."""
    from .options import BLOCK_BYTES
    from .readers import open_reader

    reader = open_reader(path)
    try:
        j = resolve_columns(reader, [ref], option)[0]
        column = reader.columns[j]
        if not column.numeric:
            raise InputError(f"{path}: {option}: column {j} ({column.name}) holds text, not numbers")
        parts = [numeric_matrix(block, [j], what)[:, 0] for block in reader.blocks(BLOCK_BYTES)]
    finally:
        reader.close()
    return np.concatenate(parts) if parts else np.empty(0)
