#!/bin/bash
# On the lent GPU machine (after bench/gpu/prepare.sh here, carry [".gpu"]): compile_phases.py over CASES, the step
# programs after XLA's optimisations kept in $OUT/dump (the other dumped files removed), results in $OUT/phases.jsonl.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
CASES=${CASES:-flowlayers:mixed_bfloat16:gpt keras:mixed_bfloat16:gpt flowlayers:float32:gpt keras:float32:gpt flowlayers:mixed_bfloat16:gpt:large keras:mixed_bfloat16:gpt:large}
source bench/gpu/install.sh
DUMP=$OUT/dump python3 bench/gpu/compile_phases.py "$OUT/phases.jsonl" $CASES | cut -c1-600
find "$OUT/dump" -type f ! -name '*after_optimizations.txt' -delete
du -sh "$OUT/dump"
