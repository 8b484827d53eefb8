#!/bin/bash
# On the lent GPU machine (after bench/gpu/prepare.sh here, carry [".gpu"]): issue 40's models - the GPT, the 342M
# GPT (GM_SIZE=large) and ResNet-18 of gpu_models.py - flowlayers against Keras 3 on JAX under one policy, each case
# a fresh process, the two runners alternated; JSON lines appended to $OUT/models.jsonl as each case ends.
#   CASES: "policy:model[:large]" words (default: bf16 for the three, then float32 GPT)
#   INSTALL (1; 0 where keras and flowlayers are installed: a check of this script on a CPU with GM_SMALL=1)
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
CASES=${CASES:-mixed_bfloat16:gpt mixed_bfloat16:resnet mixed_bfloat16:gpt:large float32:gpt mixed_bfloat16:gpt mixed_bfloat16:resnet}
source bench/gpu/install.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.csv" 2>&1
python3 -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" \
    | tee "$OUT/versions.txt" || exit 1
for case in $CASES; do
    IFS=: read -r policy model size <<< "$case"
    for runner in flowlayers keras; do
        GM_SIZE=$size timeout 240 python3 bench/gpu/policy_run.py "$policy" "$runner" "$model" \
            2>>"$OUT/stderr.txt" | tee -a "$OUT/models.jsonl"
    done
done
tail -n 20 "$OUT/stderr.txt"
