"""Where the time to the first step goes, flowlayers against Keras 3 on JAX, for gpu_models.py's models (issue 40):
each case a fresh process running ``policy_run.py`` (its first, untimed fit is the first step's epoch) with JAX's
compile log and XLA's pass timer on; one JSON line per case: every program compiled (tracing, lowering, XLA's
compile seconds) and the XLA passes that took longest in the training step's program.

    python bench/gpu/compile_phases.py OUT.jsonl CASE...      CASE: runner:policy:model[:large]
    env: DUMP=DIR writes the step program after XLA's optimisations into DIR/CASE/ (text)
On the lent GPU after ``prepare.sh`` (``compile_phases.sh`` runs it); on a CPU with ``GM_SMALL=1``."""
import collections
import json
import logging
import os
import re
import runpy
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_PROGRAMS = re.compile(r"counted|train_step|steps|scanned")


def child(policy, runner, model):
    """In the measured process: log each compile with its phases, then run the case as policy_run.py does."""
    import jax

    jax.config.update("jax_log_compiles", True)
    start, programs = time.perf_counter(), []

    class Compiles(logging.Handler):
        def emit(self, record):
            m = re.match(r"Finished (tracing|jaxpr to MLIR module conversion|XLA compilation) (?:of )?(\S+)"
                         r".* in ([\d.]+) sec", record.getMessage())
            if m:
                programs.append({"phase": m.group(1).split()[0], "program": m.group(2),
                                 "s": round(float(m.group(3)), 3), "at_s": round(time.perf_counter() - start, 2)})

    logging.getLogger("jax").addHandler(Compiles())
    logging.getLogger("jax").setLevel(logging.DEBUG)
    sys.argv = ["policy_run.py", policy, runner, model]
    runpy.run_path(os.path.join(HERE, "policy_run.py"), run_name="__main__")
    print("PROGRAMS " + json.dumps(programs), flush=True)


def passes(stderr):
    """XLA's pass times (``hlo_pass_pipeline`` at verbosity 1) in the step's program: the slowest passes and the
    pipelines, in seconds."""
    module, by_pass, by_pipeline = None, collections.Counter(), collections.Counter()
    for line in stderr.splitlines():
        m = re.search(r"Running HLO pass pipeline on module (\S+): (\S+)", line)
        if m:
            module, pipeline = m.groups()
            continue
        m = re.search(r"HLO pass: (\S+) time: (\d+) us", line)
        if m and module and STEP_PROGRAMS.search(module):
            by_pass[m.group(1)] += int(m.group(2))
            by_pipeline[pipeline] += int(m.group(2))
    top = lambda c: {k: round(v / 1e6, 3) for k, v in c.most_common(12)}
    return {"passes_s": round(sum(by_pass.values()) / 1e6, 3), "top_passes": top(by_pass),
            "pipelines": top(by_pipeline)}


def measure(case, out):
    runner, policy, model, *size = case.split(":")
    env = dict(os.environ, TF_CPP_VMODULE="hlo_pass_pipeline=1", TF_CPP_MIN_LOG_LEVEL="0",
               GM_SIZE=size[0] if size else "", GM_STEPS=os.environ.get("GM_STEPS", "8"))
    if os.environ.get("DUMP"):
        where = os.path.join(os.environ["DUMP"], case.replace(":", "_"))
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_dump_to={where} --xla_dump_hlo_as_text"
                            f" --xla_dump_hlo_module_re=.*(counted|train_step).*").strip()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", policy, runner, model], env=env,
                          capture_output=True, text=True, timeout=int(os.environ.get("CASE_TIMEOUT", "240")))
    record = {"case": case, "rc": done.returncode, "process_s": round(time.perf_counter() - t0, 2)}
    for line in done.stdout.splitlines():
        if line.startswith("PROGRAMS "):
            programs = json.loads(line[len("PROGRAMS "):])
            record["compiles"] = [p for p in programs if p["phase"] == "XLA"]
            record["compile_s"] = round(sum(p["s"] for p in record["compiles"]), 2)
            record["trace_s"] = round(sum(p["s"] for p in programs if p["phase"] == "tracing"), 2)
        elif line.startswith("{") and '"runner"' in line:
            record["fit"] = json.loads(line)
    record.update(passes(done.stderr))
    if done.returncode:
        record["stderr_tail"] = done.stderr[-2000:]
    print(json.dumps(record), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        for case in sys.argv[2:]:
            measure(case, sys.argv[1])
