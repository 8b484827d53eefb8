"""A plan without an engine: where only numpy and flowlayers are installed, a model is built, printed, summarised and
planned (``tests/plan_programs/attention_conv_plan.py``), and every figure equals the plan made here, with the engine
installed and the shards read back from it.  ``$FLOWLAYERS_BARE_PYTHON`` names the interpreter of such an
environment (``.ci/run`` makes one); without it the program runs here with TensorFlow, JAX and Keras unimportable."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flowlayers as flow

PROGRAM = Path(__file__).resolve().parents[1] / "plan_programs" / "attention_conv_plan.py"


def _load_program():
    namespace = {"__name__": "attention_conv_plan"}
    exec(compile(PROGRAM.read_text(), str(PROGRAM), "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_a_model_is_built_printed_summarised_and_planned_without_an_engine_and_the_figures_match(tmp_path):
    out = tmp_path / "plan.json"
    bare = os.environ.get("FLOWLAYERS_BARE_PYTHON")
    command = [bare, str(PROGRAM), str(out)] if bare else [sys.executable, str(PROGRAM), str(out), "--hide-engines"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "FLOWLAYERS_BACKEND": flow.config.backend_name()})
    assert run.returncode == 0, run.stdout + run.stderr
    without = json.loads(out.read_text())
    assert without["engines_loaded"] == []
    assert "sbp=(S(0), B)" in without["reprs"][0] and "Params held per device" in without["summary"]

    program = _load_program()
    model, blobs = program["build"]()
    lines = []
    model.summary(print_fn=lines.append)
    with_engine = program["described"](model, blobs, "\n".join(lines))
    assert with_engine["engines_loaded"]          # the shards were read back from a running engine
    for key in ("reprs", "sbp", "summary", "plan_text", "bytes_per_device", "comm_bytes_per_step", "variables",
                "boxing"):
        assert without[key] == with_engine[key], key
    assert without["variables"]["hidden/kernel"][0] == [16, 16]              # columns over model=2
    assert without["variables"]["attention/query/kernel"][0] == [16, 1, 8]   # heads over model=2
