"""The recall plot (the paper's Figure 2), from the data of reports.recall_curves.

matplotlib is optional (pip install 'bigsearch[plots]'); it is imported only here, when
a plot is drawn.
"""

from pathlib import Path

from ..storage.atomic import atomic_path

PLOTS_HINT = "plotting needs matplotlib: pip install 'bigsearch[plots]'"


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(PLOTS_HINT) from e
    return plt


# Okabe & Ito's palette, safe for the common colour-vision deficiencies; with a line style
# and marker per method, the curves stay apart in greyscale too.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
FORMATS = ("png", "pdf", "svg")
BAND_LABEL = "shaded: ±1 SD over runs"


def recall_figure(curves, title=None):
    """Positives found vs queries: each method's mean with a ±1 standard deviation band
    (sample SD over runs; no band for a single run), the ideal and the expected random
    curves. Returns the matplotlib figure (the caller closes it)."""
    plt = _pyplot()
    from matplotlib.patches import Patch
    t = curves["queries"]
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=120)
    # drawn above the methods (zorder): a method that finds a positive at every query follows it exactly
    ax.plot(t, curves["ideal"], color="0.2", linestyle=(0, (6, 2, 1, 2)), linewidth=1.2, label="ideal", zorder=4)
    banded = False
    every = max(1, len(t) // 8)
    for k, (name, c) in enumerate(curves["methods"].items()):
        color = OKABE_ITO[k % len(OKABE_ITO)]
        ax.plot(t, c["mean"], color=color, linestyle=LINE_STYLES[k % len(LINE_STYLES)], linewidth=1.6,
                marker=MARKERS[k % len(MARKERS)], markevery=(k % every, every), markersize=4,
                label=f"{name} ({c['runs']} run{'s' * (c['runs'] != 1)})")
        if c["runs"] > 1:
            low = [m - s for m, s in zip(c["mean"], c["std"])]
            high = [m + s for m, s in zip(c["mean"], c["std"])]
            ax.fill_between(t, low, high, color=color, alpha=0.15, linewidth=0)
            banded = True
    ax.plot(t, curves["random"], color="0.45", linestyle=(0, (1, 2)), linewidth=1.2, label="random (expected)")
    ax.set_xlabel("queries")
    ax.set_ylabel("positives found")
    ax.set_xlim(0, t[-1] if t else 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if banded:
        handles.append(Patch(facecolor="0.5", alpha=0.3, linewidth=0))
        labels.append(BAND_LABEL)
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_recall(curves, path, title=None):
    """:func:`recall_figure` saved beside ``path`` in every format of FORMATS (PNG for a
    look, PDF and SVG for a paper: vector); returns the paths written."""
    plt = _pyplot()
    path = Path(path)
    fig = recall_figure(curves, title)
    try:
        written = [path.with_suffix(f".{fmt}") for fmt in FORMATS]
        for p in written:
            with atomic_path(p) as tmp:       # a killed run leaves the old figure, never half of one
                fig.savefig(tmp, format=p.suffix[1:])
    finally:
        plt.close(fig)
    return written
