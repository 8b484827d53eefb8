"""The peer benchmark keeps working: its smoke mode (one LeNet configuration per contender, each in its worker
process, 200 real MNIST images, one round) writes a results table with a rate and a peak memory for each.  No timing is checked here:
figures belong to bench/RESULTS.md."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow     # runs the benches in a process of their own

REPO = Path(__file__).resolve().parents[1]


def test_bench_smoke_writes_results(shared_data, tmp_path):
    out = tmp_path / "results.md"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_peers.py"), "--smoke", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split("|") for line in out.read_text().splitlines()
            if line.startswith(("| flowlayers consistent (job face), 2 dev", "| flowlayers mirrored (Keras face), 2 dev",
                                "| Keras 3 + MirroredStrategy, 2 dev", "| DTensor loop (split step), 2 dev"))]
    assert len(rows) == 4, out.read_text()
    for row in rows:
        assert float(row[2]) > 0 and float(row[9].split()[0]) > 0    # samples/s, peak RSS MB
