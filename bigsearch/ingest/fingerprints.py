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

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import InputError, ParameterError

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
    starts = range(0, len(smiles), TASK_MOLECULES)
    parts = [smiles[a : a + TASK_MOLECULES] for a in starts]
    found = []
    for a, s, (rows, columns, values, bad) in zip(starts, parts, _map(sparse_fingerprints, parts, spec)):
        if bad >= 0:
            raise InputError(
                f"{where(a + bad)}: {s[bad]!r} is not a SMILES string RDKit can parse; fix or drop the row"
            )
        found.append((a + rows, columns, values))
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


def _map(fn, parts, spec):
    """fn(part, spec) for each part, in order: on the worker processes of
    :func:`fingerprint_workers` when they are running and there are several parts."""
    if _WORKERS and len(parts) > 1:
        try:
            return list(_WORKERS[-1].map(fn, parts, [spec] * len(parts)))
        except BrokenProcessPool:  # a worker was killed: do it all here
            pass
    return [fn(part, spec) for part in parts]


_WORKERS = []  # the pools of the fingerprint_workers blocks running now, innermost last


@contextmanager
def fingerprint_workers():
    """Within this block, :func:`fingerprints` parses on one worker process per core.

    The workers are forked when the block starts (ingest starts it before it reads or
    writes anything, so before any thread of the store's library exists: forking a
    process with threads risks a lock held forever) and stopped when it ends. Forked, not
    spawned: a spawned worker would run the caller's script again. One core, a process that
    is itself a worker (a dask worker), or a system other than Linux (where forking is
    unavailable or unsafe) parses here."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if cores < 2 or multiprocessing.parent_process() is not None or not sys.platform.startswith("linux"):
        yield
        return
    pool = ProcessPoolExecutor(cores, mp_context=multiprocessing.get_context("fork"))
    pool.submit(int).result()  # a fork context starts every worker at the first task: now
    _WORKERS.append(pool)
    try:
        yield
    finally:
        _WORKERS.remove(pool)
        pool.shutdown(cancel_futures=True)
