"""Only the recall figures of the paper scripts: each script's Table 1 run (the figure's
data, resumed when it exists) and its recall.png, .pdf and .svg copied into
benchmarks/paper/results/<dataset>/. The full scripts (adult.py, mnist.py, higgs.py) do
this too, with every other table.

    python benchmarks/paper/figures.py      # about 5 minutes on 2 idle cores
"""

from adult import BUDGET as ADULT_BUDGET
from adult import adult_store
from higgs import BUDGET as HIGGS_BUDGET
from higgs import higgs_store
from mnist import PAPER_POSITIVES, mnist_store

from common import PAPER_TABLE1, Report, run, store_info


def main():
    mnist = mnist_store()
    mnist_budget = 2 * round(PAPER_TABLE1["mnist"]["budget"] * store_info(mnist)["positives"] / PAPER_POSITIVES / 2)
    for name, store, budget, alpha in (("adult", adult_store(), ADULT_BUDGET, 1e-6), ("mnist", mnist, mnist_budget, 0),
                                       ("higgs", higgs_store(), HIGGS_BUDGET, 1e-6)):
        _, run_dir = run(name, "table1", store, budget, extra=("--alpha", alpha))
        Report(name).copy_figures(run_dir)


if __name__ == "__main__":
    main()
