"""Runs ../shared/tools/gpu_models.py (copied to .gpu/ by prepare.sh) under a dtype policy on both sides: Keras
through its own GM_POLICY, flowlayers through flow.mixed_precision.set_global_policy, set before the model is built.
    python bench/gpu/policy_run.py POLICY RUNNER MODEL        POLICY: float32 | mixed_bfloat16 | mixed_float16
Prints the case, then gpu_models.py's JSON line."""
import json
import os
import runpy
import sys

policy, runner, model = sys.argv[1:4]
print(json.dumps({"case": f"{runner} {model} {policy}", "size": os.environ.get("GM_SIZE", "base")}), flush=True)
if policy != "float32":
    if runner == "flowlayers":
        os.environ["FLOWLAYERS_BACKEND"] = "jax"
        import flowlayers as flow
        flow.mixed_precision.set_global_policy(policy)
    else:
        os.environ["GM_POLICY"] = policy
here = os.path.dirname(os.path.abspath(__file__))
sys.argv = ["gpu_models.py", runner, model]
runpy.run_path(os.path.join(here, "..", "..", ".gpu", "gpu_models.py"), run_name="__main__")
