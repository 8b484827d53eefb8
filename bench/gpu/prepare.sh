#!/bin/sh
# Here, before a GPU session's device call: fills .gpu/ (git-ignored) with what bench/gpu/run.sh needs on the lent
# machine, which has JAX but not Keras, its two small dependencies, our MNIST files or gpu_peers.py:
#   sh bench/gpu/prepare.sh                       # SHARED: the shared folder (default ../shared)
# then run `bash bench/gpu/run.sh` there with carry [".gpu"] (see bench/gpu/README.md).
set -eu
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
rm -rf .gpu
mkdir -p .gpu/data .gpu/whl
cp "$SHARED"/data/t10k-images-idx3-ubyte.gz "$SHARED"/data/t10k-labels-idx1-ubyte.gz .gpu/data/
cp "$SHARED"/tools/gpu_peers.py "$SHARED"/tools/gpu_models.py .gpu/
# the machine's Python is 3.12; keras' other requirements are installed there
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .gpu/whl keras==3.15.1 namex==0.1.0 optree==0.20.0
du -sh .gpu
