"""The recall plot (the paper's Figure 2), from the data of reports.recall_curves.

matplotlib is optional (pip install 'bigsearch[plots]'); it is imported only here, when
a plot is drawn.
"""

PLOTS_HINT = "plotting needs matplotlib: pip install 'bigsearch[plots]'"


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(PLOTS_HINT) from e
    return plt


def plot_recall(curves, path, title=None):
    """Positives found vs queries: each method's mean with a +-1 std band, the ideal
    and the expected random curves; saved to ``path`` (PNG)."""
    plt = _pyplot()
    t = curves["queries"]
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=120)
    try:
        ax.plot(t, curves["ideal"], color="0.3", linestyle="--", linewidth=1, label="ideal")
        for name, c in curves["methods"].items():
            low = [m - s for m, s in zip(c["mean"], c["std"])]
            high = [m + s for m, s in zip(c["mean"], c["std"])]
            line, = ax.plot(t, c["mean"], linewidth=1.6, label=f"{name} ({c['runs']} runs)")
            ax.fill_between(t, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
        ax.plot(t, curves["random"], color="0.5", linestyle=":", linewidth=1.2, label="random (expected)")
        ax.set_xlabel("queries")
        ax.set_ylabel("positives found")
        ax.set_xlim(0, t[-1] if t else 1)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        if title:
            ax.set_title(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
