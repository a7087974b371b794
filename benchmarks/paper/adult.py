"""The paper's Adult experiments (Table 1, Table 2) with bigsearch, plus what we checked.

    python benchmarks/paper/adult.py      # about 8 minutes on 2 cores; resumable

Adult is prepared like LIBSVM's a9a (continuous columns in 5 quantile bins, everything
one-hot, unit rows) with the >50K positives subsampled to 5% (docs/ingest.md). The paper:
10 runs from one random positive, T = 200, LAS with alpha = 1e-6 and pi the true
prevalence, AGR with 500 k-means anchors.
"""

from common import PAPER_TABLE1, PAPER_TABLE2, Report, cell, pairs, prepare, replication_ingest, run, store_info

BUDGET = 200


def adult_store():
    return prepare("adult", *replication_ingest("adult"))


def main():
    report = Report("adult")
    store = adult_store()
    info = store_info(store)
    report.numbers["store"] = info
    report.add(f"Store: {info['n']:,} points x {info['r']} features, {info['positives']:,} positives "
               "(tools/prepare_paper_datasets.sh).")

    main_runs, main_dir = run("adult", "table1", store, BUDGET, extra=("--alpha", 1e-6))
    report.table1(main_runs, PAPER_TABLE1["adult"], "Table 1, the paper's settings (alpha = 1e-6)")
    report.numbers["table1"] = main_runs["summary"]
    report.figure(main_dir)

    # the same experiment with 30 runs: the first 10 are the runs above (resumed, not recomputed)
    more, _ = run("adult", "table1", store, BUDGET, runs=30, extra=("--alpha", 1e-6))
    report.table1(more, PAPER_TABLE1["adult"], "Table 1 with 30 runs")
    report.numbers["table1_30_runs"] = more["summary"]
    report.difference(more, PAPER_TABLE1["adult"])
    report.spread(more)

    alpha_rows = ["| LAS alpha | 100 | 200 |", "|---|---:|---:|"]
    for alpha in (0, 1e-6, 1e-4, 1e-2):
        res = main_runs if alpha == 1e-6 else run("adult", f"las-alpha-{alpha:g}", store, BUDGET, methods="las",
                                                  extra=("--alpha", alpha))[0]
        alpha_rows.append(f"| {alpha:g} | {cell(res['summary'], 'las', 100)} | {cell(res['summary'], 'las', 200)} |")
        report.numbers[f"las_alpha_{alpha:g}"] = res["summary"]["las"]
    report.add("### LAS and the weight of the rescaled impact factor (10 runs)", *alpha_rows)

    report.batches({b: main_runs if b == 1 else run("adult", f"batch-{b}", store, BUDGET, methods="las,wnas",
                                                    extra=("--alpha", 1e-6, "--batch-size", b))[0]
                    for b in (1, 5, 20)}, BUDGET)
    report.table2(pairs("adult", "table2", store), PAPER_TABLE2["adult"])
    report.save()


if __name__ == "__main__":
    main()
