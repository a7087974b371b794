"""Option types and decorators shared by the commands."""

import click


class IndexList(click.ParamType):
    """A comma-separated list of non-negative integers, e.g. 3,17,42."""

    name = "I,J,..."

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            out = [int(v) for v in str(value).split(",") if v.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if any(i < 0 for i in out):
            self.fail(f"{value!r} has a negative index", param, ctx)
        return out


class MethodList(click.ParamType):
    """One method or a comma-separated list of them."""

    name = "METHOD[,METHOD...]"

    def __init__(self, choices):
        self.choices = choices

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = [v.strip() for v in str(value).split(",") if v.strip()]
        for v in out:
            if v not in self.choices:
                self.fail(f"unknown method {v!r}; choose from {', '.join(self.choices)}", param, ctx)
        if not out:
            self.fail("no method given", param, ctx)
        return out


def las_options(f):
    """--pi, --eta, --w0, --alpha: the parameters of LAS (and ASG)."""
    for decorator in reversed([
        click.option("--pi", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
                     help="Prior probability of a positive (default: the prevalence of the stored labels)."),
        click.option("--eta", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.5,
                     show_default=True, help="Transition probability into a labeled point's pseudo-node."),
        click.option("--w0", type=click.FloatRange(0, min_open=True), default=None,
                     help="Weight of an unlabeled point's pseudo-node (default 1/n)."),
        click.option("--alpha", type=click.FloatRange(0), default=0.0, show_default=True,
                     help="Weight of the rescaled impact factor in the selection."),
    ]):
        f = decorator(f)
    return f
