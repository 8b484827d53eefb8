"""The tutorials run end to end (``--smoke``: a few steps), as a user runs them, and say what they promise."""
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow     # every tutorial runs in its own process

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


def run_tutorial(name, *args, cwd, devices=2, timeout=300):
    """Run ``tutorials/<name>`` in its own process with ``devices`` logical CPUs; return its stdout."""
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES=str(devices), TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    env.pop("FLOWLAYERS_VIEW", None)
    result = subprocess.run([sys.executable, str(TUTORIALS / name), "--smoke", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{name}: exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def number_after(label, text):
    match = re.search(re.escape(label) + r"\s*([-+0-9.e]+)", text)
    assert match, f"expected a line with {label!r}, received:\n{text[-2000:]}"
    return float(match.group(1))


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
def test_quickstart_smoke(view, tmp_path):
    out = run_tutorial("01_quickstart.py", "--view", view, "--devices", "2", "--out", str(tmp_path), cwd=tmp_path)
    assert f"view: {view}, devices: 2" in out
    # four Adam steps already beat a uniform guess (loss ln 10 = 2.303, accuracy 0.1): 2.19 and 0.49 when written
    assert number_after("test loss:", out) < math.log(10) - 0.05
    assert number_after("test accuracy:", out) > 0.3
    assert (tmp_path / "01_training_curve.png").stat().st_size > 0


def test_consistent_vs_mirrored(tmp_path):
    out = run_tutorial("02_consistent_vs_mirrored.py", "--devices", "2", cwd=tmp_path)
    assert "mirrored: images placeholder (50, 1, 8, 8)" in out          # a ListNumpy placeholder is per device
    assert "consistent: images placeholder (100, 1, 8, 8), sbp (S(0),)" in out   # a Numpy one is logical
    for program in ("mirrored", "consistent"):
        first, last = re.search(rf"Part \d: seed 000's {program} program.*?loss: ([0-9.]+) at step 1 -> "
                                rf"([0-9.]+)", out, re.S).groups()
        assert float(last) < float(first), f"{program} program: the loss did not fall\n{out}"
    diffs = [float(d) for d in re.findall(r"^\s+(?:mirrored|consistent)\s+\d+\s+[0-9.]+\s+([0-9.e+-]+)$", out, re.M)]
    assert len(diffs) == 3 and max(diffs) < 1e-5, out
    assert "same weights in every place (to 1e-5): True" in out


def test_job_functions(tmp_path):
    out = run_tutorial("03_job_functions.py", "--view", "consistent", "--devices", "2", cwd=tmp_path)
    assert "building train_job: images (100, 1, 8, 8) flow.float32, sbp (S(0),)" in out
    # five SGD steps: the loss falls and the test loss is below a uniform guess's (2.286 < 2.305, 2.270 when written)
    assert number_after("step    5: mean loss", out) < number_after("step    1: mean loss", out)
    assert number_after("test loss:", out) < math.log(10)
    assert "InputError: job function 'train_job': placeholder 'images' expected shape (100, 1, 8, 8), " \
           "received (64, 1, 8, 8)" in out
    assert "predictions unchanged after the refused call: True" in out


def test_model_parallelism(tmp_path):
    out = run_tutorial("04_model_parallelism.py", "--out", str(tmp_path), cwd=tmp_path, devices=4)
    assert "Parallel plan (consistent view, mesh data=2, model=2" in out          # str(plan) is a table
    assert "hidden/kernel: logical (256, 128), sbp (B, S(1)), each device holds (256, 64)" in out
    assert "logits/kernel: logical (128, 10), sbp (B, S(0)), each device holds (64, 10)" in out
    assert "forward all-reduces over 'model': 1 " in out                      # one per Megatron pair
    assert number_after("max |w - w(1 device)|", out) < 1e-5
    assert (tmp_path / "04_parallel_plan.png").stat().st_size > 10_000
    held = {m: int(n.replace(",", "")) for m, n in re.findall(r"^(data=\S+(?: x model=\d)?)\s+\w+\s+([0-9,]+)", out, re.M)}
    assert held["data=2 x model=2"] < held["data=4"] and held["data=1 x model=4"] < held["data=2 x model=2"], held


def test_checkpoints(tmp_path):
    out = run_tutorial("05_checkpoints.py", "--workdir", str(tmp_path / "work"), cwd=tmp_path, devices=4)
    assert "each device holds (64, 32) of hidden/kernel (64, 64)" in out
    assert out.count("weights bit-identical True") == 2
    assert "variable 'hidden/kernel' expected shape (64, 64), received (64, 32)" in out
    assert "is damaged: file" in out and "00000.npy" in out
    assert "weights unchanged after both: True" in out
    assert "killed by SIGKILL" in out and "job: starting at step 6" in out      # resumed at the last backup
    assert number_after("resumed run vs uninterrupted run: max |w diff|", out) < 1e-6
    assert "backup removed after success: True" in out
    assert "trained in the consistent view on 2 device(s), saved at step 2" in out          # flow.train.CheckPoint
    assert "loaded in the mirrored view on 1 device(s): train_job resumes at step 2" in out
    assert number_after("resumed in another view vs never stopped: max |prediction diff|", out) < 1e-5


def test_custom_layer_and_op(tmp_path):
    out = run_tutorial("06_custom_layer_and_op.py", "--devices", "2", cwd=tmp_path)
    assert "x split by columns: sbp (S(1),) -> l2_normalize: sbp (S(0),)" in out
    assert "DTypeError" in out and "l2_normalize expected a floating input, received dtype flow.int32" in out
    assert "same weights in every place (to 1e-5): True" in out
    assert number_after("l2_normalize vs numpy on 2 devices: max |diff|", out) < 1e-5


def test_char_gpt_with_tensor_parallelism(tmp_path):
    out = run_tutorial("07_char_gpt.py", "--devices", "4", cwd=tmp_path, devices=4)
    assert "mesh {'data': 2, 'model': 2}" in out
    assert re.search(r"b0_attn/query/kernel\s+\(64, 4, 16\)\s+-> \(64, 2, 16\)", out), out    # heads split
    assert re.search(r"b0_mlp_in/kernel\s+\(64, 256\)\s+-> \(64, 128\)", out), out
    assert "forward all-reduces over 'model' per step: 4 (two per block)" in out
    before, after = map(float, re.search(r"loss per character: ([0-9.]+) before, ([0-9.]+) after", out).groups())
    uniform = float(re.search(r"uniform guess: ([0-9.]+)", out).group(1))
    assert after < before and after < uniform, out          # 12 steps: 5.03 -> 3.24 (uniform 4.59) when written
    assert re.search(r"sample after .*:\n.{1,}", out)


@pytest.mark.parametrize("view, devices", [("consistent", 2), ("mirrored", 4)])
def test_resnet_on_digits(view, devices, tmp_path):
    out = run_tutorial("08_resnet.py", "--view", view, "--devices", str(devices), cwd=tmp_path, devices=devices)
    assert f"view: {view}, devices: {devices}" in out
    first, last = map(float, re.search(r"training loss: ([0-9.]+) \(first epoch\) -> ([0-9.]+)", out).groups())
    assert last < first
    # two epochs: 0.897 (consistent, 2) and 0.953 (mirrored, 4) when written; a uniform guess is 0.1
    assert number_after("test accuracy:", out) > 0.7


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_processes_with_the_launcher(view, tmp_path):
    """Tutorial 09 as its docstring runs it: 2 processes of 2 devices, started by the launcher."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("FLOWLAYERS_VIEW", None)
    result = subprocess.run([sys.executable, "-m", "flowlayers.launch", "--processes", "2", "--devices-per-process",
                             "2", str(TUTORIALS / "09_processes.py"), "--smoke", "--view", view, "--workdir",
                             str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{out[-3000:]}\n{result.stderr[-3000:]}"
    assert f"[process 0] process 0 of 2: 2 device(s) each, 4 in the job, view {view}" in out
    assert "[process 1] process 1 is here" in out and "[process 1] process 0" not in out    # one speaker
    sums = re.findall(r"\[process (\d)\] process \d: weights checksum ([0-9.]+)", out)
    assert len(sums) == 2 and sums[0][1] == sums[1][1], out       # every process holds the same whole weights
    assert "[process 0] weights loaded back by 2 process(es) are bit-identical: True" in out
    assert number_after("test loss:", out) < math.log(10) + 0.1
