"""What a reviewer's columns hold: the title, the abstract, the keywords, ... and the label.

A file of references names its columns in many ways: ``title`` in a CSV, ``primary_title``
(RIS ``T1``) from EndNote, ``TI`` in a Web of Science export, ``Article Title`` or ``Title`` in
a database's spreadsheet. :func:`document_roles` finds each role's column among a file's
column names, case-insensitively, with the aliases ASReview's readers accept
(``asreview/data/base.py``) and those of the usual exports (RIS tags, Web of Science's and
Scopus's column names). The text features, the labelling page and ingest's hint about a
label column read it; nothing else lists the aliases.
"""

import re
from collections.abc import Iterable

# role -> its column's names, the most telling first (compared case-insensitively, with
# runs of spaces, '_' and '-' read as one space)
ROLES: dict[str, tuple[str, ...]] = {
    "title": ("title", "primary title", "ti", "t1", "article title", "document title", "primary_title"),
    "abstract": ("abstract", "notes abstract", "ab", "n2", "abstract note", "abstract text"),
    "keywords": (
        "keywords",
        "kw",
        "author keywords",
        "mesh terms",
        "mesh",
        "mh",
        "de",
        "index keywords",
        "keywords plus",
    ),
    "authors": ("authors", "first authors", "author names", "author", "au", "a1", "author full names", "af"),
    "year": ("year", "publication year", "py", "y1", "pubyear", "publication date"),
    "journal": (
        "journal",
        "journal name",
        "source title",
        "secondary title",
        "journal/book",
        "so",
        "t2",
        "jo",
        "jf",
        "publication title",
        "source",
    ),
    "doi": ("doi", "do", "di"),
    "type": ("type", "type of reference", "document type", "publication type", "ty", "pt", "dt"),
    "label": (
        "included",
        "label included",
        "included label",
        "label",
        "included final",
        "final included",
        "asreview label",
        "included flag",
        "include",
        "relevant",
        "decision",
        "inclusion",
    ),
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", str(name)).strip().lower()


def document_roles(column_names: Iterable[str]) -> dict[str, str]:
    """{role: column name} for the roles (title, abstract, keywords, authors, year, journal,
    doi, type, label) that a column of ``column_names`` plays, by name: for each role, the
    column matching its most telling alias (``ROLES``), compared without case and with
    spaces, '_' and '-' alike (``Article Title``, ``article_title``). Roles no column plays
    are left out; a column plays at most one role."""
    names = [str(n) for n in column_names]
    by_key: dict[str, str] = {}
    for name in names:
        by_key.setdefault(_key(name), name)
    roles: dict[str, str] = {}
    taken: set[str] = set()
    for role, aliases in ROLES.items():
        for alias in aliases:
            name = by_key.get(_key(alias))
            if name is not None and name not in taken:
                roles[role] = name
                taken.add(name)
                break
    return roles


def role_column(column_names: Iterable[str], name: str) -> str | None:
    """The column playing the role that ``name`` names (the role or one of its aliases, as
    ``document_roles`` compares them), or None: ``--text-column title,abstract`` reads an
    EndNote export's ``primary_title`` (T1) and ``notes_abstract`` (N2), or a file's
    ``Title``."""
    key = _key(name)
    role = next((r for r, aliases in ROLES.items() if key in {_key(a) for a in aliases}), None)
    return document_roles(column_names).get(role) if role else None
