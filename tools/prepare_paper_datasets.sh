#!/usr/bin/env bash
# Prepare the paper's data sets the way the paper did (docs/ingest.md), from `bigsearch datasets`
# (fetched from $BIGSEARCH_DATA_MIRROR, else ../shared/datasets when it is there, else the internet).
# Usage: tools/prepare_paper_datasets.sh [OUT_DIR]   (default: ./stores)
set -euo pipefail
mirror="$(dirname "$0")/../../shared/datasets"
if [ -z "${BIGSEARCH_DATA_MIRROR:-}" ] && [ -d "$mirror" ]; then
    export BIGSEARCH_DATA_MIRROR="$(cd "$mirror" && pwd)"
fi
bigsearch datasets fetch adult mnist higgs > /dev/null
data="$(dirname "$(bigsearch datasets path adult)")"
out="${1:-stores}"
mkdir -p "$out"

# Adult: continuous columns in 5 quantile bins, everything one-hot, unit rows, positives (>50K) at 5%.
bigsearch ingest "$data/adult/adult.data" "$data/adult/adult.test" "$out/adult.zarr" \
    --label-column 14 --positive '>50K' --positive '>50K.' --bins 5 --normalize \
    --prevalence 0.05 --seed 0 --overwrite

# MNIST (the 10,000 test images here): 784 pixels, unit rows, digit 1 positive at 1%.
bigsearch ingest "$data/mnist/t10k-images-idx3-ubyte.gz" "$out/mnist.zarr" \
    --labels "$data/mnist/t10k-labels-idx1-ubyte.gz" --positive 1 --normalize \
    --prevalence 0.01 --seed 0 --overwrite

# HIGGS (7,000-row excerpt), prepared like the paper's CoverType: unit rows, a bias, then
# random Fourier features (10x the input width) for the RBF kernel; signal subsampled to 1%
# (HIGGS is 53% signal; Active Search is about rare positives).
bigsearch ingest "$data/higgs/lightgbm_binary.train" "$out/higgs.zarr" \
    --label-column 0 --normalize --bias --rff 290 --gamma 1 --prevalence 0.01 --seed 0 --overwrite

for s in adult mnist higgs; do bigsearch info "$out/$s.zarr"; echo; done
