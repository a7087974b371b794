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

KINDS = ("atompair", "morgan")
DEFAULT_BITS = 2048
MORGAN_RADIUS = 2
ATOMPAIR_LENGTHS = (1, 3)


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


def fingerprints(smiles, spec, where=lambda i: f"row {i}"):
    """An (m, spec.bits) float64 array, one row per SMILES string.

    ``where(i)`` names row i of the block in error messages (file and line)."""
    from rdkit import Chem

    out = np.zeros((len(smiles), spec.bits))
    encode = _encoder(spec)
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s) if s else None
        if mol is None:
            raise InputError(f"{where(i)}: {s!r} is not a SMILES string RDKit can parse; fix or drop the row")
        encode(mol, out[i])
    return out


def _encoder(spec):
    """A function (mol, row) filling one row of features in place."""
    from rdkit.Chem import rdFingerprintGenerator, rdMolDescriptors

    lo, hi = ATOMPAIR_LENGTHS
    if spec.kind == "atompair" and spec.counts:

        def encode(mol, row):
            for k, v in (
                rdMolDescriptors.GetHashedAtomPairFingerprint(mol, nBits=spec.bits, minLength=lo, maxLength=hi)
                .GetNonzeroElements()
                .items()
            ):
                row[k] = v
    elif spec.kind == "atompair":

        def encode(mol, row):
            row[
                list(
                    rdMolDescriptors.GetHashedAtomPairFingerprintAsBitVect(
                        mol, nBits=spec.bits, minLength=lo, maxLength=hi
                    ).GetOnBits()
                )
            ] = 1.0
    else:
        generator = rdFingerprintGenerator.GetMorganGenerator(radius=MORGAN_RADIUS, fpSize=spec.bits)
        get = generator.GetCountFingerprintAsNumPy if spec.counts else generator.GetFingerprintAsNumPy

        def encode(mol, row):
            row[:] = get(mol)

    return encode
