"""The machine code of a warm LAS iteration's kernels against floor.py's, per target CPU (issue 40 item 3).

A warm LAS iteration at alpha 0 or 0.01 with one new label is one call of ``kernels/las.py``
``update_items`` per thread: per block of rows the dot products with V (``kernels/common.py``
``row_dots``: ``row1_dots`` on AMD CPUs, ``rows2_dots`` elsewhere, ``rows4_dots`` for wide rows
and narrow codes), then the per-point loop (``update_block``) and the candidate lists. floor.py's
pass is its ``_xv`` (one float64 dot product per output column, ``prange`` over rows). We have no
AMD machine, but LLVM compiles for any CPU: for each target this compiles, in a fresh process with
``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` set and an empty numba cache, those kernels for float32
and float64 chunks (the signatures a tiny LAS run on this host compiles, so the types are the
engine's), with ``row_dots``' shape as that CPU's vendor gets it, and floor.py's ``_xv`` imported
by path from the file itself, and reads each one's ``inspect_asm()``: its loops (backward jumps),
and for the innermost loops with floating-point work the vector registers used, the float32 ->
float64 widenings (vcvtps2pd) and multiply-adds (vfmadd*) and their widths, loads and stores per
iteration, elements per iteration and the unroll (interleave) factor, horizontal reductions inside
the loop and in the code around it that runs once per row (per row and column for floor.py).

Nothing is run or timed in a process compiled for another CPU (its code may use instructions this
CPU lacks); the only code run is the tiny LAS that finds the signatures, on this host's own code.

Targets are ``CPU`` (that CPU's own features: what numba compiles on such a host), ``CPU/host``
(the CPU's tuning with this host's features: what ``NUMBA_CPU_NAME=CPU`` alone gives here, and what
``benchmarks/floor_ratios.py --codegen CPU`` runs), ``host``, each optionally with ``:TOGGLES``,
LLVM features added or removed (``znver5:+prefer-256-bit``, ``host:-prefer-256-bit``: the preferred
vector width is a tuning feature of LLVM's CPU models).

    python benchmarks/kernel_codegen.py --floor ../shared/tools/floor.py [--targets ...] [--asm DIR]

Writes results/kernel_codegen.json and prints a table; about 2-4 minutes (compiling only).
"""

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from common import run_fresh, save, table

CAPTURE = r"""
import os, pickle, sys, tempfile
import numpy as np
import bigsearch
from bigsearch.kernels import common as kernels_common, las, rows
from common import report
# the engine's own calls on this host's own code: the signatures of the kernels compiled for them
with tempfile.TemporaryDirectory() as d:
    for dt in ("float32", "float64"):
        X = np.random.default_rng(0).random((20000, 16)).astype(dt)
        st = bigsearch.create_store(os.path.join(d, dt + ".zarr"), X, chunk_rows=4096)
        for a in (0.0, 0.01):
            s = bigsearch.LAS(st, alpha=a, pi=0.1)
            s.tell(0, 1); s.tell(s.ask(), 0); s.tell(s.ask(), 0); s.ask(); s.close()
sigs = {"update_items": las.update_items.signatures, "row_dots": kernels_common.row_dots.signatures,
        "rows_times": rows.rows_times.signatures}
pickle.dump(sigs, open(sys.argv[1], "wb"))
report({k: [str(s) for s in v] for k, v in sigs.items()})
"""

WORKER = r"""
import importlib.util, pickle, sys
import numba
from numba import types
spec, floor_path, sig_path, vendor = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
import bigsearch.kernels.common as kernels_common
if vendor != "auto":                   # the shape row_dots takes on that CPU's vendor (read when compiled)
    kernels_common.ONE_ROW_SHAPE = vendor == "amd"
from bigsearch.kernels import las, rows
from common import report
load = importlib.util.spec_from_file_location("floor", floor_path)
floor = importlib.util.module_from_spec(load)
load.loader.exec_module(floor)
sigs = pickle.load(open(sig_path, "rb"))
dtype_of = lambda sig: str(sig[0].dtype)
out = {"cpu": numba.config.CPU_NAME, "features": numba.config.CPU_FEATURES,
       "one_row_shape": kernels_common.ONE_ROW_SHAPE,
       "kernels": []}

def dump(name, fn, sig):
    fn.compile(sig)                     # compiled only, never called: the code may not run here
    out["kernels"].append({"kernel": name, "dtype": dtype_of(sig), "asm": fn.inspect_asm(sig)})

for sig in sigs["update_items"]:
    dump("update_items", las.update_items, sig)
for sig in sigs["row_dots"]:
    if not sig[0].mutable:
        continue                        # update_items passes chunks as mutable carrays (chunk_at)
    dump("row1_dots", kernels_common.row1_dots, sig)
    dump("rows2_dots", kernels_common.rows2_dots, sig)
for dt in (types.float32, types.float64):  # floor.py's maps are read-only float32; float64 for the comparison
    mat = types.Array(types.float64, 2, "C")
    dump("floor._xv", floor._xv, (types.Array(dt, 2, "C", readonly=True), mat, mat))
for sig in sigs["rows_times"]:
    dump("rows_times", rows.rows_times, sig)
report(out)
"""

DEFAULT_TARGETS = [
    "znver5",
    "znver4",
    "znver5/host",
    "znver5:+prefer-256-bit",
    "icelake-server",
    "skylake-avx512",
    "haswell",
    "host",
    "host:-prefer-256-bit",
]
AMD = re.compile(r"^znver")

# Dot products one pass of a dot-product function's inner loop computes: 3 columns of one row
# (row1_dots), of two rows (rows2_dots), of four (rows4_dots); floor.py's loop one column.
DOTS = {"row1_dots": 3, "rows2_dots": 6, "rows4_dots": 12, "parfor_gufunc": 1, "buffer_dots": 3}
HORIZONTAL = re.compile(r"^v(extractf|extracti|hadd|shuf|permil|unpckh|perm2f|shuff|permpd|movhlps)")
MEMORY = re.compile(r"-?[\w$.+-]*\((%\w+)?(,%\w+)?(,\d)?\)(\s*\{%k\d\}(\{z\})?)?")  # masked too
REGISTER = re.compile(r"%([xyz])mm\d+")
WIDTH = {"x": 128, "y": 256, "z": 512}


# ----- reading the assembly -----


def demangle(symbol):
    """numba's mangled name as dotted components (bigsearch.kernels.common.row1_dots), or
    'parfor_gufunc' for a prange loop's body; None for wrappers (cpython., cfunc., __gufunc__.)."""
    if symbol.startswith(("cfunc.", "__gufunc__.", "_ZN7cpython", "NRT_")) or not symbol.startswith("_ZN"):
        return None
    parts, s = [], symbol[3:]
    while s and s[0].isdigit():
        n = re.match(r"\d+", s).group()
        parts.append(s[len(n) : len(n) + int(n)])
        s = s[len(n) + int(n) :]
    name = ".".join(parts)
    return "parfor_gufunc" if "__numba_parfor_gufunc" in name else name


def functions(asm):
    """{short function name: [lines]} of an assembly listing, wrappers left out."""
    out, name = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([^\s.#][^:\s]*):\s*$", line)
        if m:
            full = demangle(m.group(1))
            name = full.rsplit(".", 1)[-1] if full else None
            if name:
                out.setdefault(name, [])
            continue
        if name:
            out[name].append(line)
    return out


def instructions(lines):
    """[(index, mnemonic, operands)] of the lines that are instructions, and {label: index}."""
    code, labels = [], {}
    for i, line in enumerate(lines):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        if s.endswith(":"):
            labels[s[:-1]] = i
        elif not s.startswith("."):
            mnemonic, *rest = s.split(None, 1)
            code.append((i, mnemonic, split_operands(rest[0] if rest else "")))
    return code, labels


def split_operands(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return out + [cur.strip()] if cur.strip() else out


def loops(code, labels):
    """Loops as (first line, last line) regions: a label and the latest backward jump to it."""
    ends = {}
    for i, mnemonic, ops in code:
        if mnemonic.startswith("j") and ops and ops[0] in labels and labels[ops[0]] < i:
            ends[ops[0]] = max(ends.get(ops[0], 0), i)
    return sorted((labels[label], end) for label, end in ends.items())


def inside(a, b):
    return b[0] <= a[0] and a[1] <= b[1] and a != b


def loop_stats(code, region, children=()):
    """Counts over the instructions of ``region`` that are in none of ``children``."""
    body = [
        (i, m, ops)
        for i, m, ops in code
        if region[0] <= i <= region[1] and not any(c[0] <= i <= c[1] for c in children)
    ]
    s = {
        "instructions": len(body),
        "xmm": 0,
        "ymm": 0,
        "zmm": 0,
        "loads": 0,
        "stores": 0,
        "horizontal": 0,
        "cvtps2pd": [],
        "fma": [],
        "fma_accumulators": set(),
        "div": [],
        "fp_other": 0,
    }
    for _, m, ops in body:
        for op in ops:
            for r in REGISTER.findall(op):
                s[r + "mm"] += 1
        mem = [k for k, op in enumerate(ops) if MEMORY.fullmatch(op)]
        if mem and not m.startswith(("lea", "nop", "prefetch")):
            last = len(ops) - 1
            reads = any(k != last for k in mem) or (mem[-1] == last and not m.startswith(("mov", "vmov")))
            s["loads"] += reads
            s["stores"] += mem[-1] == last and len(ops) > 1
        dest = REGISTER.search(ops[-1]) if ops else None
        width = WIDTH[dest.group(1)] if dest else None
        if m.startswith("vcvtps2pd") or m.startswith("vcvtss2sd"):
            s["cvtps2pd"].append(64 if m.startswith("vcvtss2sd") else width)
        elif re.match(r"vf(n)?m(add|sub)\d+[ps][ds]", m):
            s["fma"].append(64 if m.endswith("sd") else width)
            s["fma_accumulators"].add(ops[-1])
        elif m.startswith("vdiv"):
            s["div"].append(64 if m.endswith("sd") else width)
        elif HORIZONTAL.match(m):
            s["horizontal"] += 1
        elif re.match(r"v(add|sub|mul|max|min)[ps]d", m):
            s["fp_other"] += 1
    s["fma_accumulators"] = len(s["fma_accumulators"])
    return s


def widths(ws):
    """A list of widths in bits as 'count x width' ('4 x zmm', '2 x ymm + 1 x scalar')."""
    names = {64: "scalar", 128: "xmm", 256: "ymm", 512: "zmm"}
    return " + ".join(f"{ws.count(w)} x {names.get(w, w)}" for w in sorted(set(ws), key=str, reverse=True)) or "-"


def describe(fn, lines, r):
    """The hot loop of one function (its innermost loop doing the most floating-point lanes of
    work per iteration) and the code around it that runs once per pass of it."""
    code, labels = instructions(lines)
    regions = loops(code, labels)
    inner = [g for g in regions if not any(inside(h, g) for h in regions)]
    found = []
    for g in inner:
        s = loop_stats(code, g)
        lanes = sum(w // 64 for w in s["fma"]) + sum(w // 64 for w in s["div"])
        if s["fma"] or s["div"] or s["cvtps2pd"]:
            found.append((lanes, g, s))
    if not found:
        return None
    # the main loop for any r adds into vector accumulators; loops with shuffles inside are
    # versions for a few columns (floor.py's for r < 8) or the per-point loop's
    vertical = [f for f in found if f[2]["horizontal"] == 0] or found
    lanes, hot, s = max(vertical, key=lambda t: (t[0], -t[1][0]))
    parents = [g for g in regions if inside(hot, g)]
    vec = max(s["fma"] + s["div"] + s["cvtps2pd"] or [64])
    text = [lines[i].strip() for i in range(hot[0], hot[1] + 1) if lines[i].strip()]
    out = {
        "function": fn,
        "loops_in_function": len(regions),
        "fp_inner_loops": len(found),
        "vector_width_bits": vec,
        "registers": {k: s[k] for k in ("xmm", "ymm", "zmm")},
        "instructions": s["instructions"],
        "cvtps2pd": widths(s["cvtps2pd"]),
        "cvtps2pd_count": len(s["cvtps2pd"]),
        "fma": widths(s["fma"]),
        "fma_count": len(s["fma"]),
        "fma_accumulators": s["fma_accumulators"],
        "div": widths(s["div"]),
        "loads": s["loads"],
        "stores": s["stores"],
        "horizontal_in_loop": s["horizontal"],
        "loop_text": text,
    }
    dots = DOTS.get(fn)
    if dots and s["fma"]:
        elements = sum(w // 64 for w in s["fma"]) // dots
        out["elements_per_iteration"] = elements
        out["unroll"] = elements // (vec // 64)
        out["iterations_per_pass_at_r"] = r / elements
    if parents:
        parent = min(parents, key=lambda g: g[1] - g[0])
        children = [g for g in regions if inside(g, parent)]
        around = loop_stats(code, parent, children)
        out["around"] = {k: around[k] for k in ("instructions", "horizontal", "fp_other", "stores", "loads")}
        if dots and s["fma"]:
            # a pass of the hot loop computes `dots` dot products; a row needs 3 (V's three
            # columns): 1 pass a row for row1, 1/2 for rows2, 3 for floor.py. A static count
            per_row = 3 / dots
            it = r / out["elements_per_iteration"]
            out["per_row_at_r"] = {
                "passes": per_row,
                "instructions": per_row * (it * s["instructions"] + around["instructions"]),
                "cvtps2pd": per_row * it * len(s["cvtps2pd"]),
                "fma": per_row * it * len(s["fma"]),
                "loads": per_row * (it * s["loads"] + around["loads"]),
                "horizontal": per_row * (it * s["horizontal"] + around["horizontal"]),
            }
    return out


# ----- the targets and the report -----

# (compiled kernel, function whose hot loop is read, what the loop is)
READ = [
    ("update_items", "row1_dots", "dots"),
    ("update_items", "rows2_dots", "dots"),
    ("update_items", "update_block", "per-point"),
    ("row1_dots", "row1_dots", "dots"),
    ("rows2_dots", "rows2_dots", "dots"),
    ("floor._xv", "parfor_gufunc", "dots"),
    ("rows_times", "rows_times", "tile"),
]


def known_cpu(name):
    """Whether this llvmlite's LLVM knows the CPU (it warns and falls back to a generic one)."""
    code = (
        "import llvmlite.binding as ll; ll.initialize_native_target(); "
        f"ll.Target.from_default_triple().create_target_machine(cpu={name!r})"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return done.returncode == 0 and "not a recognized processor" not in done.stderr


def target_env(spec, cache, host_features=None):
    """The environment of a target's process (numba's CPU name and features), and the vendor
    whose row_dots shape it gets. ``spec``: NAME[:TOGGLES] with NAME ``host``, ``CPU`` (that CPU's
    own features) or ``CPU/host`` (this host's features: code that runs here), TOGGLES LLVM
    features to add or remove (``+prefer-256-bit``)."""
    env = {"NUMBA_CACHE_DIR": cache}
    name, _, toggles = spec.partition(":")
    cpu, here = (name[: -len("/host")], True) if name.endswith("/host") else (name, name == "host")
    if cpu != "host":
        env["NUMBA_CPU_NAME"] = cpu
    if not here:
        env["NUMBA_CPU_FEATURES"] = toggles  # '' = the CPU's own features
    elif toggles:
        env["NUMBA_CPU_FEATURES"] = f"{host_features or host_cpu_features()},{toggles}"
    return env, "auto" if cpu == "host" else "amd" if AMD.match(cpu) else "intel"


def host_cpu_features():
    """This CPU's features as LLVM lists them (what numba compiles for by default)."""
    import llvmlite.binding as ll

    return ll.get_host_cpu_features().flatten()


def shape_id(text):
    """A short id of a loop's instruction sequence with registers and offsets left out: equal ids,
    the same loop."""
    import hashlib

    ops = " ".join(line.split()[0] for line in text if not line.startswith("."))
    return hashlib.sha1(ops.encode()).hexdigest()[:8]


def compile_target(spec, floor, sigs, tmp, r, asm_dir):
    env, vendor = target_env(spec, tempfile.mkdtemp(dir=tmp))
    print(f"{spec}: compiling ...", file=sys.stderr)
    raw = run_fresh(WORKER, spec, floor, sigs, vendor, env=env)
    kernels = []
    for k in raw["kernels"]:
        if asm_dir:
            name = f"{spec.replace('/', '_').replace(':', '_')}-{k['kernel']}-{k['dtype']}.s"
            (asm_dir / name).write_text(k["asm"])
        fns = functions(k["asm"])
        for kernel, fn, what in READ:
            if kernel != k["kernel"] or fn not in fns:
                continue
            lines = fns[fn]
            if what == "per-point":  # the loop with the divisions (rho = b / d, c_i)
                lines = per_point_lines(lines)
            d = describe(fn, lines, r)
            if d:
                d["loop_shape_id"] = shape_id(d["loop_text"])
                kernels.append({"kernel": kernel, "dtype": k["dtype"], "what": what, **d})
    selected = "row1_dots" if raw["one_row_shape"] else "rows2_dots"
    for k in kernels:
        if k["kernel"] == "update_items" and k["what"] == "dots":
            k["selected_at_r"] = k["function"] == selected
    return {
        "target": spec,
        "env": env | {"NUMBA_CACHE_DIR": "(empty, temporary)"},
        "cpu": raw["cpu"],
        "features": raw["features"],
        "one_row_shape": raw["one_row_shape"],
        "kernels": kernels,
    }


def per_point_lines(lines):
    """update_block's lines with the loops that divide kept (the per-point loop): the other
    loops (J's update, the sums) blanked, so ``describe`` reads that one."""
    code, labels = instructions(lines)
    regions = loops(code, labels)
    keep = [g for g in regions if any(m.startswith("vdiv") for i, m, _ in code if g[0] <= i <= g[1])]
    if not keep:
        return lines
    return [
        line if any(g[0] <= i <= g[1] for g in keep) or not line.startswith("\t") else ""
        for i, line in enumerate(lines)
    ]


def summary_rows(results):
    rows = []
    for t in results:
        for k in t["kernels"]:
            if k["kernel"] == "update_items" and k["what"] == "dots" and not k.get("selected_at_r"):
                continue  # the shape this vendor does not take; its standalone compile is listed
            per = k.get("per_row_at_r", {})
            rows.append(
                {
                    "target": t["target"],
                    "dtype": k["dtype"],
                    "kernel": k["kernel"] if k["kernel"] == k["function"] else f"{k['kernel']}:{k['function']}",
                    "width": k["vector_width_bits"],
                    "cvtps2pd": k["cvtps2pd"],
                    "fma": k["fma"],
                    "div": k["div"],
                    "loads": k["loads"],
                    "elems/it": k.get("elements_per_iteration"),
                    "unroll": k.get("unroll"),
                    "hred": k["horizontal_in_loop"],
                    "row:instr": round(per["instructions"]) if per else None,
                    "row:cvt": round(per["cvtps2pd"]) if per else None,
                    "row:fma": round(per["fma"]) if per else None,
                    "row:loads": round(per["loads"]) if per else None,
                    "row:hred": round(per["horizontal"]) if per else None,
                    "shape": k["loop_shape_id"],
                }
            )
    return rows


COLUMNS = [
    "target",
    "dtype",
    "kernel",
    "width",
    "cvtps2pd",
    "fma",
    "div",
    "loads",
    "elems/it",
    "unroll",
    "hred",
    "row:instr",
    "row:cvt",
    "row:fma",
    "row:loads",
    "row:hred",
    "shape",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floor", required=True, help="path of ../shared/tools/floor.py")
    ap.add_argument("--targets", nargs="*", default=DEFAULT_TARGETS)
    ap.add_argument("--r", type=int, default=128, help="row width for the per-row counts (default 128)")
    ap.add_argument("--asm", type=Path, help="also write every compiled kernel's assembly into this directory")
    ap.add_argument("--name", default="kernel_codegen")
    args = ap.parse_args()
    for var in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"):  # each target sets its own
        os.environ.pop(var, None)
    targets = list(args.targets)
    if "znver5" in " ".join(targets) and not known_cpu("znver5"):
        targets = [t.replace("znver5", "znver4") for t in targets]
        print("this LLVM does not know znver5: znver4 instead", file=sys.stderr)
    if args.asm:
        args.asm.mkdir(parents=True, exist_ok=True)
    floor = str(Path(args.floor).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        sigs = os.path.join(tmp, "signatures.pkl")
        captured = run_fresh(CAPTURE, sigs, env={"NUMBA_CACHE_DIR": tempfile.mkdtemp(dir=tmp)})
        results = [compile_target(t, floor, sigs, tmp, args.r, args.asm) for t in targets]
    import llvmlite
    import llvmlite.binding as ll
    import numba

    rows = summary_rows(results)
    table(rows, COLUMNS)
    save(
        args.name,
        {
            "floor": floor,
            "numba": numba.__version__,
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, ll.llvm_version_info)),
            "host_cpu": ll.get_host_cpu_name(),
            "r": args.r,
            "signatures": {k: v for k, v in captured.items() if k != "worker_seconds"},
            "columns": {
                "width": "widest vector register of the hot loop's FP work (bits)",
                "cvtps2pd": "float32 -> float64 widenings per iteration (count x destination register)",
                "fma": "multiply-adds per iteration (count x register)",
                "loads": "instructions reading memory per iteration",
                "elems/it": "elements of a row per iteration and dot product",
                "unroll": "elems/it / lanes: independent vector accumulators per dot product",
                "hred": "horizontal (shuffle / extract) instructions inside the loop",
                "row:*": "static counts per row at r (loop iterations x loop + the code around it once a pass)",
                "shape": "id of the loop's instruction sequence (registers and offsets left out)",
            },
            "summary": rows,
            "targets": results,
        },
    )


if __name__ == "__main__":
    main()
