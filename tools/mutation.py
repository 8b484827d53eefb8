"""Mutation testing of flowlayers' critical modules: plant one small bug at a time, run the tests that cover
that module, and report the bugs no test noticed (survivors).

    python tools/mutation.py                     # every module below, a fixed sample of its mutants, 2 jobs
    python tools/mutation.py --list              # the mutants it would plant, planting none
    python tools/mutation.py --only checkpoint --per-module 0      # every mutant of the matching modules
    python tools/mutation.py --rerun             # only last run's survivors (after writing tests for them)

Run by hand, never in CI (a full run takes tens of minutes).  Each job works in its own copy of the tree
(``git ls-files``) under a temporary folder, imported through PYTHONPATH ahead of the installed package, so
the checkout is never modified.  A mutant is *killed* when its tests fail, error or pass the time limit.
Results: ``tools/MUTATION_RESULTS.md`` (a table and every survivor's diff) and ``tools/mutation_results.json``.

Mutants are made from the syntax tree: arithmetic and comparison operators swapped, ``and``/``or`` swapped,
conditions negated, numbers nudged, ``True``/``False`` flipped, call statements dropped, and well-known
look-alike functions swapped (``re.search``/``re.match``, ``min``/``max``, ``any``/``all``).  Code that only
builds a message (``raise`` statements, f-strings, docstrings) is left alone.  Besides these, a few *named*
mutants replay bugs once found by hand (issue 17); they are always planted.
"""
import argparse
import ast
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RESULTS_MD, RESULTS_JSON = HERE / "MUTATION_RESULTS.md", HERE / "mutation_results.json"

T = "tests/"
STEP_TESTS = [T + "parallel/test_view_equivalence.py", T + "parallel/test_replicas_and_rules.py",
              T + "optimizers", T + "parallel/test_update_kernels.py", T + "parallel/test_mirrored_all_reduce.py",
              T + "parallel/test_hybrid.py", T + "parallel/test_split_step.py", T + "parallel/test_placement.py",
              T + "models/test_nested_models.py"]
PLAN_TESTS = [T + "parallel/test_planner_units.py", T + "parallel/test_boxing.py", T + "parallel/test_signatures.py",
              T + "parallel/test_hybrid.py", T + "parallel/test_with_sbp.py", T + "parallel/test_placement.py"]
CHECKPOINT_TESTS = [T + "test_checkpoints.py", T + "test_oneflow_model_io.py"]
ERROR_TESTS = [T + "test_input_checks.py", T + "test_user_errors.py", T + "parallel/test_replicas_and_rules.py",
               T + "parallel/test_rules_change.py"]
WATCH_TESTS = [T + "processes/test_watch_units.py"]
JAX_KERNEL_TESTS = [T + "ops/test_ops_reference.py", T + "layers/test_layers_reference.py",
                    T + "ops/test_nn_conv2d_job.py"]

# module -> the tests that cover it (what runs against each of its mutants), by area of the issue
TARGETS = {
    # op signatures
    "flowlayers/ops/rules.py": PLAN_TESTS,
    "flowlayers/ops/matmul.py": PLAN_TESTS + [T + "ops/test_ops_reference.py"],
    "flowlayers/ops/elementwise.py": PLAN_TESTS + [T + "ops/test_ops_reference.py"],
    # the planner and Boxing
    "flowlayers/parallel/plan.py": PLAN_TESTS,
    "flowlayers/parallel/boxing.py": PLAN_TESTS,
    "flowlayers/parallel/propagate.py": PLAN_TESTS,
    # both runtimes' steps
    "backends/flowlayers_tensorflow/executable.py": STEP_TESTS,
    "backends/flowlayers_tensorflow/consistent.py": STEP_TESTS,
    "backends/flowlayers_tensorflow/mirrored.py": STEP_TESTS,
    "backends/flowlayers_tensorflow/step.py": STEP_TESTS,
    # settings, the placement value, planning once and binding values (issue 20)
    "flowlayers/framework/compiled.py": [T + "test_placement_value.py", T + "parallel/test_rules_change.py",
                                         T + "parallel/test_hybrid.py",
                                         T + "parallel/test_view_equivalence.py", T + "test_checkpoints.py",
                                         T + "models/test_steps_per_execution.py"],
    # data sources
    "flowlayers/models/data_adapter.py": [T + "models/test_data_adapters.py", T + "models/test_keras_surface.py",
                                          T + "test_checkpoints.py", T + "models/test_steps_per_execution.py"],
    "flowlayers/optimizers/functional.py": [T + "optimizers/test_functional_rules.py"],
    # the optimizer rules
    "flowlayers/optimizers/rules.py": [T + "optimizers", T + "parallel/test_update_kernels.py"],
    "flowlayers/optimizers/base.py": [T + "optimizers", T + "parallel/test_update_kernels.py", T + "test_checkpoints.py"],
    # checkpoints and resume
    "flowlayers/framework/checkpoint_format.py": CHECKPOINT_TESTS + [T + "checkpoint"],     # issue 37
    "flowlayers/callbacks/backup.py": CHECKPOINT_TESTS + [T + "test_backup_order_check.py"],
    "flowlayers/models/batch_fingerprint.py": [T + "test_backup_order_check.py"],
    "flowlayers/initializers.py": [T + "test_keras_initializers.py", T + "layers/test_einsum_dense.py"],
    "flowlayers/callbacks/progbar.py": [T + "models/test_progress_bar.py"],
    "flowlayers/callbacks/callback.py": [T + "models/test_keras_callbacks.py", T + "callbacks"],
    # Keras' monitoring callbacks, each against its Keras twin
    "flowlayers/callbacks/monitor.py": [T + "callbacks"],
    "flowlayers/callbacks/early_stopping.py": [T + "callbacks"],
    "flowlayers/callbacks/learning_rate.py": [T + "callbacks"],
    "flowlayers/callbacks/model_checkpoint.py": [T + "callbacks"],
    "flowlayers/utils/arrays.py": [T + "test_keras_utils.py"],
    "flowlayers/models/epoch_iterator.py": [T + "models/test_epoch_iterator.py", T + "models/test_data_adapters.py",
                                            T + "models/test_steps_per_execution.py"],
    "flowlayers/registry.py": [T + "test_keras_utils.py"],
    "flowlayers/train.py": CHECKPOINT_TESTS,
    # the user-error checks
    "flowlayers/framework/variable.py": ERROR_TESTS + [T + "parallel/test_view_equivalence.py"],
    "flowlayers/inputs.py": ERROR_TESTS,
    "flowlayers/config.py": ERROR_TESTS + [T + "test_placement_value.py"],
    # whole-model save, regularizers, placements on some devices
    "flowlayers/models/saving.py": [T + "models/test_whole_model_save.py", T + "layers/test_layer_configs.py"],
    "flowlayers/regularizers.py": [T + "test_regularizers.py"],
    "backends/flowlayers_tensorflow/placements.py": [T + "parallel/test_placement.py"],
    # Transformers: vocabulary parallelism, recomputation, micro-batches, the presets
    "flowlayers/parallel/presets.py": [T + "parallel/test_gpt_parallel.py", T + "parallel/test_attention_parallel.py"],
    "backends/flowlayers_tensorflow/recompute.py": [T + "parallel/test_recompute.py"],
    "backends/flowlayers_tensorflow/lowering.py": [T + "parallel/test_recompute.py", T + "parallel/test_gpt_parallel.py",
                                                   T + "test_user_errors.py", T + "parallel/test_replicas_and_rules.py",
                                                   T + "parallel/test_activation_all_to_all.py",
                                                   T + "layers/test_existing_layers_on_a_mesh.py"],
    # DTensor's layout of a dropping index: the written-out steps take their inputs with tf.unstack
    "backends/flowlayers_tensorflow/kernels/recurrent.py": [T + "layers/test_recurrent.py"],
    # the Backend classes' calls handed to their modules
    "flowlayers/backend_common/modules.py": [T + "test_backend_docs.py", T + "parallel/test_plan_without_engine.py",
                                             T + "export", T + "test_cross_backend.py"],
    "flowlayers/ops/embedding.py": [T + "parallel/test_signatures.py", T + "parallel/test_gpt_parallel.py"],
    # fast dispatch (issue 21): grouped steps, metrics read late
    "flowlayers/metrics/base.py": [T + "metrics", T + "models/test_steps_per_execution.py"],
    "flowlayers/metrics/confusion.py": [T + "metrics"],
    "flowlayers/optimizers/loss_scale.py": [T + "mixed_precision"],
    "flowlayers/mixed_precision.py": [T + "mixed_precision"],
    "flowlayers/ops/indexing.py": PLAN_TESTS + [T + "ops/test_keras_ops.py"],
    "flowlayers/models/keras_files/training_config.py": [T + "saving", T + "metrics/test_metric_names.py"],
    "flowlayers/models/training.py": [T + "models/test_steps_per_execution.py", T + "models/test_data_adapters.py",
                                      T + "test_jax_backend.py"],
    "flowlayers/contract.py": ERROR_TESTS + [T + "test_jax_backend.py", T + "models/test_steps_per_execution.py",
                                         T + "test_placement_value.py"],
    # the jax backend (run with FLOWLAYERS_BACKEND=jax)
    "flowlayers/launch.py": WATCH_TESTS + [T + "processes/test_launch.py", T + "processes/test_watch.py"],
    "flowlayers/env.py": [T + "processes/test_launch.py"] + WATCH_TESTS,
    "flowlayers/framework/cluster.py": [T + "processes/test_launch.py"] + WATCH_TESTS,
    # the launcher's watch (issue 37): the process a stalled job waits on, stopping whole process groups, the guard
    "flowlayers/launch_watch.py": WATCH_TESTS + [T + "processes/test_watch.py"],
    "flowlayers/launch_guard.py": WATCH_TESTS + [T + "processes/test_watch.py"],
    "backends/flowlayers_jax/executable.py": [T + "models/test_steps_per_execution.py", T + "test_cross_backend.py",
                                              T + "test_jax_backend.py", T + "models/test_keras_surface.py",
                                              T + "parallel/test_compiled_program.py",
                                              T + "models/test_group_equals_single_steps.py"],
    "backends/flowlayers_jax/rows.py": [T + "models/test_steps_per_execution.py", T + "test_jax_backend.py",
                                               T + "models/test_group_equals_single_steps.py"],
    "backends/flowlayers_jax/runtime.py": [T + "test_jax_backend.py", T + "models/test_steps_per_execution.py",
                                           T + "models/test_group_equals_single_steps.py", T + "test_initializers.py",
                                           T + "parallel/test_hybrid.py"],
    "backends/flowlayers_jax/mirrored.py": [T + "models/test_steps_per_execution.py", T + "test_cross_backend.py",
                                            T + "test_jax_backend.py"],
    "backends/flowlayers_jax/consistent.py": [T + "models/test_steps_per_execution.py", T + "test_cross_backend.py",
                                              T + "test_jax_backend.py"],
    "backends/flowlayers_jax/kernels/matmul.py": [T + "test_jax_backend.py", T + "ops/test_ops_reference.py",
                                                  T + "parallel/test_view_equivalence.py"],
    "backends/flowlayers_jax/kernels/einsum.py": [T + "test_jax_backend.py", T + "ops/test_ops_reference.py",
                                                  T + "parallel/test_attention_parallel.py"],
    "backends/flowlayers_jax/host_heap.py": [T + "test_jax_backend.py"],
    # the jax backend's kernels and their lowering, checked against numpy and Keras
    **{f"backends/flowlayers_jax/kernels/{k}.py": JAX_KERNEL_TESTS
       for k in ("conv", "elementwise", "embedding", "nn", "norm", "reduce", "shape")},
    "backends/flowlayers_jax/lowering.py": JAX_KERNEL_TESTS + [T + "parallel/test_signatures.py",
                                                               T + "parallel/test_compiled_program.py",
                                                               T + "test_oneflow_face.py",
                                                               T + "models/test_dropout_masks.py"],
    "flowlayers/parallel/report.py": [T + "parallel/test_compiled_program.py", T + "parallel/test_boxing.py"],
}


@dataclass
class Mutant:
    module: str
    line: int
    start: int          # character offsets into the module's source
    end: int
    old: str
    new: str
    kind: str
    status: str = ""    # killed / survived / timeout
    seconds: float = 0.0
    detail: str = ""    # the first failing test, for killed mutants

    text: str = ""      # the mutated line as it stood, and the function or class around it: so a rerun finds
    scope: str = ""     # the mutant after other lines moved

    @property
    def key(self):
        return f"{MOVED.get(self.module, self.module)}:{self.scope}:{self.text}:{self.kind}:{self.old}->{self.new}"


# the bugs issue 17 found surviving the whole suite, replayed on every run: (module, old text, new text, kind)
NAMED = [
    ("flowlayers/optimizers/base.py", "var - var * (self.weight_decay * lr)", "var - var * self.weight_decay",
     "named: weight decay without the learning rate"),
    ("backends/flowlayers_tensorflow/lowering.py",
     "tf.constant(base, tf.int64) + tf.cast(self.replica_id, tf.int64) * 1_000_003", "tf.constant(base, tf.int64)",
     "named: one dropout mask for every replica"),
    ("flowlayers/framework/variable.py", "if re.search(pattern, self.path):", "if re.match(pattern, self.path):",
     "named: layout rules matched at the path's start only"),
    ("backends/flowlayers_tensorflow/mirrored.py",
     "updates = [_mean(means, next(rest), active, device) if active > 1 else next(rest) for _ in updates]",
     "updates = [next(rest) for _ in updates]", "named: state updates summed over replicas"),
    # issue 37: both passed every test of their module
    ("backends/flowlayers_jax/rows.py", "return [*outs, first + steps * rows] if any(made) else outs",
     "return [*outs, first + rows] if any(made) else outs", "named: the next group's first row one step on"),
    ("backends/flowlayers_jax/lowering.py",
     "key = jax.random.fold_in(jax.random.fold_in(key, self.replica), self.step)",
     "key = jax.random.fold_in(key, self.replica)", "named: one dropout mask for every step"),
]
NAMED_TESTS = {"backends/flowlayers_tensorflow/lowering.py": STEP_TESTS}

# survivors that are equivalent (no test can tell them apart by results), with why: (module, scope, old -> new)
EQUIVALENT = {
    ("flowlayers/models/batch_fingerprint.py", "Fingerprint.add", "1 -> 2"):
        "numpy reads any negative size in reshape as the rest of the elements (reshape(-2) is reshape(-1)): the "
        "same flat bytes are hashed",
    ("backends/flowlayers_tensorflow/mirrored.py", "Executable._retrace", "True -> False"):
        "reduce_retracing only decides how often TF retraces the step (shape-generic or per shape); the traced "
        "computation, and so every result, is the same: a compile-time cost (bench/)",
    ("backends/flowlayers_tensorflow/mirrored.py", "Executable._retrace", "> -> >="):
        "on one device the replica step and the update then run as separate traced functions instead of inlined: "
        "the same ops and results, a performance choice",
    ("backends/flowlayers_tensorflow/mirrored.py", "Executable._step", "> -> >="):
        "on one device the 'all-reduce' then sums a single tensor per position: the identity",
    ("backends/flowlayers_tensorflow/consistent.py", "_DTensorContext._kept", "1 -> 2"):
        "_kept only decides whether a Relayout pin is emitted; DTensor's values are the same in any layout and "
        "every consumer boxes its inputs to the planned layout (box), gradients are relaid out before the update: "
        "where a relayout happens changes, not what is computed",
    ("backends/flowlayers_tensorflow/mirrored.py", "StrategyRuntime.scope", "> -> >="):
        "one device then makes its variables under a one-device MirroredStrategy instead of on that device: one "
        "copy either way, read and written alike",
    ("backends/flowlayers_tensorflow/mirrored.py", "StrategyRuntime.all_reduce", "self.native_nchw -> "
                                                                                "not (self.native_nchw)"):
        "both paths compute the same sums (collectives with packing, or add_n on the first device; each tested "
        "against one device in test_mirrored_all_reduce.py); which runs is a per-device-kind performance choice",
    ("backends/flowlayers_tensorflow/mirrored.py", "StrategyRuntime.fetch", "> -> >="):
        "the mean of one array is that array (same dtype)",
    ("flowlayers/callbacks/history.py", "History.__init__", "super().__init__() -> pass"):
        "Callback.__init__ only sets model and params, which CallbackList sets before any hook runs",
    ("flowlayers/callbacks/progbar.py", "ProgbarLogger.__init__", "or -> and"):
        "with no stream the mutant passes file=None to print, which writes to sys.stdout: the same",
}


def equivalent(m):
    return EQUIVALENT.get((MOVED.get(m.module, m.module), m.scope, f"{m.old} -> {m.new}"))


BINOPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
          ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
CMPOPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
          ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
           ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
           ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or"}
LOOKALIKES = {"search": "match", "match": "search", "min": "max", "max": "min", "any": "all", "all": "any"}


# modules renamed since a run: a rerun plants their survivors at the new path
MOVED = {"flowlayers/checkpoint.py": "flowlayers/framework/checkpoint_format.py"}


def offsets(source):
    """(line, UTF-8 byte column) as the syntax tree gives them -> a character offset into ``source``."""
    lines = source.splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    return lambda line, col: starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="ignore"))


def scope_at(tree, line):
    """The dotted name of the innermost function or class holding ``line`` ('' at module level)."""
    best, names = "", []

    def walk(node, prefix):
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if child.lineno <= line <= child.end_lineno:
                    best = name
                    walk(child, name)
            else:
                walk(child, prefix)
    walk(tree, "")
    return best


def quiet_nodes(tree):
    """Nodes whose code only makes text: raise statements, f-strings, docstrings, logging and print calls."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.JoinedStr, ast.Assert)):
            skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.update(id(n) for n in ast.walk(node.body[0]))
    return skip


def mutants_of(module):
    source = (REPO / module).read_text()
    tree, at = ast.parse(source), offsets(source)
    skip, found = quiet_nodes(tree), []

    def span(node):
        return at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)

    def add(node, start, end, new, kind):
        found.append(Mutant(module, node.lineno, start, end, source[start:end], new, kind,
                            text=source.splitlines()[node.lineno - 1].strip(), scope=scope_at(tree, node.lineno)))

    def between(left, right, old):
        """The operator's text between two operands: its offsets."""
        lo, hi = at(left.end_lineno, left.end_col_offset), at(right.lineno, right.col_offset)
        i = source.index(old, lo, hi)
        return i, i + len(old)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            s, e = between(node.left, node.right, OP_TEXT[type(node.op)])
            add(node, s, e, OP_TEXT[BINOPS[type(node.op)]], "operator")
        elif isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                if type(op) in CMPOPS:
                    s, e = between(left, right, OP_TEXT[type(op)])
                    add(node, s, e, OP_TEXT[CMPOPS[type(op)]], "comparison")
                left = right
        elif isinstance(node, ast.BoolOp):
            s, e = between(node.values[0], node.values[1], OP_TEXT[type(node.op)])
            add(node, s, e, "or" if isinstance(node.op, ast.And) else "and", "boolean")
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            s, e = span(node.test)
            add(node.test, s, e, f"not ({source[s:e]})", "negated condition")
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
            s, e = span(node)
            new = repr(node.value + 1) if isinstance(node.value, int) else repr(node.value * 2 or 1.0)
            add(node, s, e, new, "number")
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            s, e = span(node)
            add(node, s, e, repr(not node.value), "boolean constant")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            s, e = span(node)
            add(node, s, e, "pass", "call dropped")
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in LOOKALIKES and (isinstance(f, ast.Name) or name in ("search", "match")):
                fs, fe = span(f)
                s = fe - len(name)
                add(node, s, fe, LOOKALIKES[name], "look-alike call")
    return found


def named_mutants():
    out = []
    for module, old, new, kind in NAMED:
        source = (REPO / module).read_text()
        if source.count(old) != 1:
            raise SystemExit(f"named mutant {kind!r}: expected {old!r} once in {module}, found it "
                             f"{source.count(old)} times; update NAMED")
        start = source.index(old)
        line = source.count("\n", 0, start) + 1
        out.append(Mutant(module, line, start, start + len(old), old, new, kind,
                          text=source.splitlines()[line - 1].strip(), scope=scope_at(ast.parse(source), line)))
    return out


def changed_lines(module, since):
    """The line numbers of ``module`` added or changed since git revision ``since``."""
    diff = subprocess.run(["git", "diff", "-U0", since, "--", module], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    lines = set()
    for hunk in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M):
        start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
        lines.update(range(start, start + count))
    return lines


def select(per_module, seed, only, since=None):
    chosen = [m for m in named_mutants() if not only or any(o in m.module for o in only)]
    for module in TARGETS:
        if only and not any(o in module for o in only):
            continue
        candidates = mutants_of(module)
        if since:
            changed = changed_lines(module, since)
            candidates = [m for m in candidates if m.line in changed]
        if per_module and len(candidates) > per_module:
            candidates = sorted(random.Random(f"{seed}:{module}").sample(candidates, per_module),
                                key=lambda m: m.start)
        chosen.extend(candidates)
    return chosen


def tests_for(module):
    return TARGETS.get(module) or NAMED_TESTS[module]


def make_copy(root):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    return root


def pytest_run(copy, tests, timeout):
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{copy / 'backends'}", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", "-W", "ignore",
           *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, f"over {timeout} s"
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    status = "survived" if done.returncode == 0 else "killed"
    return status, time.monotonic() - start, (failed[0] if failed else done.stdout.strip()[-200:]) if failed or \
        done.returncode else ""


def check_copy(copy):
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{copy / 'backends'}"}
    out = subprocess.run([sys.executable, "-c", "import flowlayers, flowlayers_tensorflow as t; "
                          "print(flowlayers.__file__); print(t.__file__)"], cwd=copy, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    if not all(Path(p).is_relative_to(copy) for p in out):
        raise SystemExit(f"the copy in {copy} is not what Python imports ({out}); is flowlayers installed "
                         f"non-editable over it?")


def run_one(slot, mutant, timeout):
    copy = slot
    path = copy / mutant.module
    source = path.read_text()
    path.write_text(source[:mutant.start] + mutant.new + source[mutant.end:])
    try:
        mutant.status, mutant.seconds, mutant.detail = pytest_run(copy, tests_for(mutant.module), timeout)
    finally:
        path.write_text(source)
    return mutant


def mark_gone(mutants):
    """Survivors whose code no longer exists (changed since, e.g. by the fix a survivor prompted): status 'gone'."""
    current = {m.key for m in select(0, "all", sorted({MOVED.get(m.module, m.module) for m in mutants}))}
    for m in mutants:
        if m.status == "survived" and m.key not in current:
            m.status, m.detail = "gone", "the code it mutated has changed since (git log -L on that line)"


def load_results():
    """The last run's mutants and what its full run was (commit, minutes, jobs, mutants)."""
    data = json.loads(RESULTS_JSON.read_text())
    return [Mutant(**d) for d in data["mutants"]], data["full_run"]


def report(mutants, seconds, args, commit, full_run):
    by_module = {}
    for m in mutants:
        by_module.setdefault(m.module, []).append(m)
    gone = [m for m in mutants if m.status == "gone"]
    killed = sum(m.status in ("killed", "timeout") for m in mutants)
    reruns = (f" Its survivors were planted again (`--rerun`) against the tests of commit "
              f"{full_run['rerun_commit']}." if full_run.get("rerun_commit") else "")
    lines = ["# Mutation testing: last results", "",
             f"Full run `python tools/mutation.py` at commit {full_run['commit']}.{reruns} Written "
             f"{time.strftime('%Y-%m-%d')}: **{len(mutants)} mutants, {killed} killed "
             f"({killed / max(len(mutants), 1):.0%}), {sum(m.status == 'survived' for m in mutants)} survived, "
             f"{len(gone)} gone** (their code changed since).",
             f"The full run planted {full_run['mutants']} mutants in {full_run['minutes']} minutes with "
             f"{full_run['jobs']} jobs on {os.cpu_count()} cores; the last rerun took {seconds / 60:.1f} minutes.",
             ""]
    lines += ["| module | planted | killed | survived | timeouts |", "|---|---|---|---|---|"]
    for module, ms in by_module.items():
        lines.append(f"| `{module}` | {len(ms)} | {sum(m.status in ('killed', 'timeout') for m in ms)} | "
                     f"{sum(m.status == 'survived' for m in ms)} | {sum(m.status == 'timeout' for m in ms)} |")
    survivors = [m for m in mutants if m.status == "survived" and not equivalent(m)]
    explained = [m for m in mutants if m.status == "survived" and equivalent(m)]
    others = len(mutants) - len(explained) - len(gone)
    lines += ["", f"Equivalent survivors (explained below): {len(explained)}; killed among the others: {killed} of "
              f"{others} ({killed / max(others, 1):.0%}).",
              "", "## Survivors", ""] + ([f"- `{m.module}:{m.line}` ({m.kind}): `{m.old}` -> `{m.new}`"
                                          for m in survivors] or ["None."])
    lines += ["", "## Gone (the mutated code changed since)", ""] + (
        [f"- `{m.module}:{m.line}` ({m.kind}, in `{m.scope}`): `{m.old}` -> `{m.new}`" for m in gone] or ["None."])
    lines += ["", "## Equivalent survivors", ""] + ([f"- `{m.module}:{m.line}` ({m.kind}, in `{m.scope}`): `{m.old}` "
                                                      f"-> `{m.new}`: {equivalent(m)}" for m in explained] or ["None."])
    lines += ["", "## Every mutant", "", "| module:line | kind | change | result | seconds | first failure |",
              "|---|---|---|---|---|---|"]
    for m in mutants:
        change = f"`{m.old}` -> `{m.new}`".replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{m.module}:{m.line}` | {m.kind} | {change} | {m.status} | {m.seconds:.0f} | "
                     f"{m.detail.replace('|', '/')[:120]} |")
    return "\n".join(lines) + "\n"


def args_jobs(args):
    return args[args.index("--jobs") + 1] if "--jobs" in args else "2"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--per-module", type=int, default=8, help="mutants sampled per module; 0: all (default 8)")
    parser.add_argument("--seed", default="17", help="the sample's seed")
    parser.add_argument("--only", nargs="*", default=[], help="modules whose path contains one of these")
    parser.add_argument("--since", help="only mutants on lines changed since this git revision")
    parser.add_argument("--timeout", type=int, default=600, help="seconds before a mutant counts as killed by hang")
    parser.add_argument("--list", action="store_true", help="print the mutants and plant none")
    parser.add_argument("--rerun", action="store_true", help="only the survivors of the last run")
    parser.add_argument("--named", action="store_true", help="only the named mutants (bugs once found by hand)")
    parser.add_argument("--report", action="store_true", help="write the report again from the last results")
    args = parser.parse_args(argv)
    raw = list(argv if argv is not None else sys.argv[1:])

    if args.report:
        last, full_run = load_results()
        mark_gone(last)
        RESULTS_JSON.write_text(json.dumps({"full_run": full_run, "mutants": [asdict(m) for m in last]}, indent=1)
                                + "\n")
        RESULTS_MD.write_text(report(last, full_run.get("rerun_minutes", full_run["minutes"]) * 60, raw,
                                     full_run["commit"], full_run))
        return 0
    if args.rerun:
        last, full_run = load_results()
        current = {m.key: m for m in select(0, args.seed, sorted({MOVED.get(m.module, m.module) for m in last}))}
        mutants = [current[m.key] for m in last if m.status == "survived" and m.key in current
                   and (not args.only or any(o in m.module for o in args.only))]
        for m in last:
            if m.status == "survived" and m.key not in current:
                print(f"no longer plantable (the code changed): {m.key}")
    elif args.named:
        mutants = named_mutants()
    else:
        mutants = select(args.per_module, args.seed, args.only, args.since)
    if args.list:
        for m in mutants:
            print(f"{m.module}:{m.line}  {m.kind:18}  {m.old!r} -> {m.new!r}")
        print(f"{len(mutants)} mutants")
        return 0

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="flowlayers-mutation-"))
    start = time.monotonic()
    try:
        slots = [make_copy(work / f"job{i}") for i in range(args.jobs)]
        check_copy(slots[0])
        suites = sorted({tuple(tests_for(m.module)) for m in mutants})     # each must pass before any mutant
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            clean = list(pool.map(lambda i: pytest_run(slots[i % args.jobs], suites[i], args.timeout),
                                  range(len(suites))))
        for tests, (status, secs, detail) in zip(suites, clean):
            print(f"clean run of {' '.join(tests)}: {status} in {secs:.0f} s", flush=True)
            if status != "survived":
                raise SystemExit(f"these tests fail without any mutant: {detail}")
        free = list(slots)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            pending = {}
            for i, mutant in enumerate(mutants):
                if not free:
                    done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                    for f in done:
                        free.append(pending.pop(f))
                slot = free.pop()
                pending[pool.submit(run_one, slot, mutant, args.timeout)] = slot
            for f in concurrent.futures.as_completed(pending):
                f.result()
        for m in mutants:
            print(f"{m.status:9} {m.seconds:5.0f} s  {m.module}:{m.line}  {m.kind}: {m.old!r} -> {m.new!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - start
    full_run = {"commit": commit, "minutes": round(seconds / 60, 1), "jobs": args.jobs, "mutants": len(mutants)}
    if args.rerun:      # keep the last full run's list, with the survivors' new results
        last, full_run = load_results()
        full_run.update(rerun_commit=commit, rerun_minutes=round(seconds / 60, 1))
        redone = {m.key: m for m in mutants}
        mutants = [redone.get(m.key, m) for m in last]
        mark_gone(mutants)
    RESULTS_JSON.write_text(json.dumps({"full_run": full_run, "mutants": [asdict(m) for m in mutants]}, indent=1)
                            + "\n")
    RESULTS_MD.write_text(report(mutants, seconds, raw, commit, full_run))
    survived = [m for m in mutants if m.status == "survived"]
    print(f"{len(mutants)} mutants, {len(mutants) - len(survived)} killed, {len(survived)} survived "
          f"({seconds / 60:.1f} min); see {RESULTS_MD.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
