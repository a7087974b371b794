"""Molecular fingerprints from SMILES strings (RDKit, the optional extra ``bigsearch[chem]``).

``--fingerprint atompair|morgan[:BITS]`` turns a SMILES column into BITS features:

- ``atompair``: RDKit's hashed atom-pair fingerprint with path lengths 1..3, the encoding
  MolPAL uses (``GetHashedAtomPairFingerprintAsBitVect(mol, nBits, minLength=1,
  maxLength=3)``; RDKit sets up to 4 bits per hashed pair to simulate counts);
- ``morgan``: the Morgan (ECFP4-like) fingerprint of radius 2 (``rdFingerprintGenerator``).

With ``counts`` the features are the occurrence counts of each hashed atom pair or
environment instead of bits (``GetHashedAtomPairFingerprint``, ``GetCountFingerprint``).
The spec is recorded in the store; a SMILES RDKit cannot parse stops the ingest with its
row, so no molecule is silently turned into zeros.
"""

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import InputError, ParameterError
from .workers import fingerprint_workers, worker_map

__all__ = ["fingerprint_workers"]  # where it was first

KINDS = ("atompair", "morgan")
DEFAULT_BITS = 2048
MORGAN_RADIUS = 2
ATOMPAIR_LENGTHS = (1, 3)
# Molecules per task of the worker processes: RDKit parses one in about 0.1 ms, so a task
# is tens of ms, long against sending its strings and its sparse result.
TASK_MOLECULES = 256


@dataclass(frozen=True)
class FingerprintSpec:
    kind: str
    bits: int = DEFAULT_BITS
    counts: bool = False

    def describe(self):
        out = asdict(self)
        if self.kind == "atompair":
            out.update(
                min_length=ATOMPAIR_LENGTHS[0],
                max_length=ATOMPAIR_LENGTHS[1],
                rdkit="rdMolDescriptors.GetHashedAtomPairFingerprint" + ("" if self.counts else "AsBitVect"),
            )
        else:
            out.update(
                radius=MORGAN_RADIUS,
                rdkit="rdFingerprintGenerator.GetMorganGenerator(radius=2).Get"
                + ("CountFingerprintAsNumPy" if self.counts else "FingerprintAsNumPy"),
            )
        out["rdkit_version"] = _rdkit().__version__
        return out


def parse_spec(text, counts=False):
    """'atompair', 'morgan:1024' -> FingerprintSpec; a clear error for anything else."""
    kind, _, bits = str(text).strip().lower().partition(":")
    if kind not in KINDS:
        raise ParameterError(
            f"fingerprint {text!r}: the kind must be one of {', '.join(KINDS)} (optionally :BITS, e.g. morgan:2048)"
        )
    try:
        n_bits = int(bits) if bits else DEFAULT_BITS
    except ValueError:
        raise ParameterError(f"fingerprint {text!r}: BITS must be an integer, e.g. {kind}:2048") from None
    if not 8 <= n_bits <= 1 << 20:
        raise ParameterError(f"fingerprint {text!r}: BITS must be between 8 and 1048576")
    _rdkit()
    return FingerprintSpec(kind, n_bits, bool(counts))


def _rdkit():
    try:
        import rdkit
        from rdkit import RDLogger
    except ImportError:
        raise ParameterError(
            "smiles_column needs RDKit: pip install 'bigsearch[chem]' (or pip install rdkit)"
        ) from None
    RDLogger.DisableLog("rdApp.*")  # parse failures are reported by us, with the row
    return rdkit


def fingerprints(smiles, spec, where=lambda i: f"row {i}", out=None):
    """An (m, spec.bits) float64 array, one row per SMILES string (``out``, all zeros, when
    given: the fingerprints are written into it).

    ``where(i)`` names row i of the block in error messages (file and line). Parsing is
    most of the work and holds Python's lock, so within :func:`fingerprint_workers` a
    large block is cut into tasks for worker processes (:func:`sparse_fingerprints`)."""
    out = np.zeros((len(smiles), spec.bits)) if out is None else out
    rows, columns, values = fingerprint_entries(smiles, spec, where)
    out[rows, columns] = values
    return out


def fingerprint_entries(smiles, spec, where=lambda i: f"row {i}"):
    """The fingerprints of :func:`fingerprints` as their non-zero entries (rows, columns,
    values), in row order and increasing column order within a row: what the MinMax map
    reads, without the dense block (ingest/featurize.py)."""
    found = [
        (a + rows, columns, values)
        for a, (rows, columns, values) in worker_tasks(sparse_fingerprints, smiles, spec, where=where)
    ]
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return tuple(np.concatenate(part) for part in zip(*found))


def sparse_fingerprints(smiles, spec):
    """The fingerprints of a list of SMILES as (rows, columns, values) of their non-zero
    entries, and the index of the first string RDKit cannot parse (-1 when none; the
    entries stop there)."""
    from rdkit import Chem

    _rdkit()  # in a worker process too: its parse errors are ours to report
    encode = _encoder(spec)
    counts, columns, values = [], [], []  # Python lists: one array each at the end
    bad = -1
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s) if s else None
        if mol is None:
            bad = i
            break
        counts.append(encode(mol, columns, values))
    rows = np.repeat(np.arange(len(counts)), counts)
    return rows, np.array(columns, np.int64), np.array(values, np.float64), bad


def _encoder(spec):
    """A function (mol, columns, values) appending the molecule's non-zero features to the
    two lists; it returns how many."""
    from rdkit.Chem import rdFingerprintGenerator, rdMolDescriptors

    lo, hi = ATOMPAIR_LENGTHS
    if spec.kind == "atompair" and spec.counts:

        def encode(mol, columns, values):
            found = rdMolDescriptors.GetHashedAtomPairFingerprint(
                mol, nBits=spec.bits, minLength=lo, maxLength=hi
            ).GetNonzeroElements()
            columns.extend(found.keys())
            values.extend(found.values())
            return len(found)
    elif spec.kind == "atompair":

        def encode(mol, columns, values):
            on = rdMolDescriptors.GetHashedAtomPairFingerprintAsBitVect(
                mol, nBits=spec.bits, minLength=lo, maxLength=hi
            ).GetOnBits()
            columns.extend(on)
            values.extend([1.0] * len(on))
            return len(on)
    else:
        generator = rdFingerprintGenerator.GetMorganGenerator(radius=MORGAN_RADIUS, fpSize=spec.bits)
        get = generator.GetCountFingerprintAsNumPy if spec.counts else generator.GetFingerprintAsNumPy

        def encode(mol, columns, values):
            row = get(mol)
            k = np.flatnonzero(row)
            columns.extend(k.tolist())
            values.extend(row[k].tolist())
            return len(k)

    return encode


def worker_tasks(fn, smiles, *args, where=lambda i: f"row {i}"):
    """fn(part, *args) for the parts of TASK_MOLECULES strings of ``smiles``, in order: on
    the worker processes of :func:`fingerprint_workers` when they are running. Each result
    ends with the index of the part's first string RDKit cannot parse (-1 when none: see
    :func:`sparse_fingerprints`); the first such string stops the ingest, named by
    ``where`` (file and line). Returns (first row of the part, its result without that
    index) for each part."""
    starts = range(0, len(smiles), TASK_MOLECULES)
    parts = [smiles[a : a + TASK_MOLECULES] for a in starts]
    found = []
    for a, s, result in zip(starts, parts, worker_map(fn, parts, args)):
        bad = result[-1]
        if bad >= 0:
            raise InputError(
                f"{where(a + bad)}: {s[bad]!r} is not a SMILES string RDKit can parse; fix or drop the row"
            )
        found.append((a, result[:-1]))
    return found
