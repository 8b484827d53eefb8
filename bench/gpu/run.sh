#!/bin/bash
# On the lent GPU machine (after bench/gpu/prepare.sh here, carry [".gpu"]): flowlayers on the jax backend and the
# peers of gpu_peers.py, each in fresh processes, alternated over ROUNDS rounds so that a process's luck is not
# read as a difference; then the dispatch probe (one process, interleaved).  JSON lines in $OUT (bench/out/gpu
# where OUT is unset); `python bench/gpu/report.py DIR` makes the tables.
#   ROUNDS (3)  PEERS ("jax keras_jax"; add torch torch_compile for those)  PROBE (1: run the probe)
#   INSTALL (1; 0 where keras and flowlayers are installed already: a check of this script on a CPU)
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/gpu}
ROUNDS=${ROUNDS:-3}
PEERS=${PEERS:-jax keras_jax}
mkdir -p "$OUT"
source bench/gpu/install.sh
export MNIST_DIR=.gpu/data
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.csv" 2>&1
python3 -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" \
    | tee "$OUT/versions.txt" || exit 1
for r in $(seq "$ROUNDS"); do
    python3 bench/bench_jax_gpu.py 2>>"$OUT/stderr.txt" | tee "$OUT/flowlayers_$r.jsonl"
    python3 .gpu/gpu_peers.py $PEERS 2>>"$OUT/stderr.txt" | tee "$OUT/peers_$r.jsonl"
done
if [ "${PROBE:-1}" = 1 ]; then
    PROBE_PROFILE=0 python3 bench/probe_jax_dispatch.py 2>>"$OUT/stderr.txt" | tee "$OUT/probe.jsonl"
fi
tail -n 5 "$OUT/stderr.txt"
python3 bench/gpu/report.py "$OUT" | tee "$OUT/report.md"
