"""What the jax backend's own matmul and einsum gradient rules are worth: flowlayers' consistent view, data parallel
on 2 logical CPU devices, with its kernels as they are (``own``) against the same ops registered with JAX's own
gradient rules (``jax``: ``jnp.matmul`` / ``jnp.einsum``, through ``register_kernel(..., replace=True)``).

    python bench/probe_jax_gradient_layout.py --write      # -> bench/RESULTS_jax_gradients.md

Models: the 4x1024 MLP of bench_jax_cpu.py (batch 256, SGD with momentum; its Dense layers are matmuls) and
tutorial 07's GPT of bench_gpt.py (width 128, 4 heads, 4 blocks, sequence 64, batch 32, Adam; its attention
projections are einsums, its MLP matmuls; only the einsum is swapped, so its figure is the einsum rule's alone).
Each (model, rule) in ``--processes`` processes, alternating own / jax; each process times ``ROUNDS`` rounds after
a warm-up; the median of all rounds is reported.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROUNDS = 3


def jax_rules(ops):
    import jax.numpy as jnp
    from flowlayers_jax.kernels import register_kernel

    if "matmul" in ops:
        @register_kernel("matmul", replace=True)
        def matmul(node, a, b, ctx):
            a = jnp.swapaxes(a, -1, -2) if node.attrs["transpose_a"] else a
            b = jnp.swapaxes(b, -1, -2) if node.attrs["transpose_b"] else b
            return jnp.matmul(a, b)
    if "einsum" in ops:
        @register_kernel("einsum", replace=True)
        def einsum(node, *operands, ctx):
            return jnp.einsum(node.attrs["equation"], *operands)


def child(model, rule):
    os.environ["FLOWLAYERS_CPU_DEVICES"] = "2"
    os.environ["FLOWLAYERS_BACKEND"] = "jax"
    sys.path.insert(0, str(HERE))
    if rule == "jax":
        jax_rules({"mlp": ("matmul",), "gpt": ("einsum",)}[model])
    rates = []
    if model == "mlp":
        import bench_jax_cpu as b
        run = b.flow_trainer({"contender": "flow_consistent", "model": "mlp", "devices": 2})
        x, y = b.load(20 * 256)
        run(x, y)
        for _ in range(ROUNDS):
            t = time.perf_counter()
            run(x, y)
            rates.append(20 * 256 / (time.perf_counter() - t))
    else:
        import bench_gpt
        from gpt_setup import add_size_arguments, batch, timed_steps
        parser = argparse.ArgumentParser()
        add_size_arguments(parser)
        args = parser.parse_args(["--batch", "32", "--steps", "10"])
        feeds, y = batch(args)
        model_ = bench_gpt.build(args, 2, {"data": 2}, dict)
        for _ in range(ROUNDS):
            step, _ = timed_steps(model_, feeds, y, args.steps)
            rates.append(args.batch / step)
    print(json.dumps({"rates": rates}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    started, rates = time.time(), {}
    for model in ("mlp", "gpt"):
        for _ in range(args.processes):
            for rule in ("own", "jax"):
                done = subprocess.run([sys.executable, __file__, "--child", model, rule], capture_output=True,
                                      text=True, env=dict(os.environ, XLA_FLAGS=""), timeout=900)
                line = next((ln for ln in done.stdout.splitlines() if ln.startswith("{")), None)
                if line is None:
                    sys.exit(f"{model} {rule}: no result; stderr: {done.stderr[-1500:]}")
                rates.setdefault((model, rule), []).extend(json.loads(line)["rates"])
                print(model, rule, " ".join(f"{r:.0f}" for r in rates[(model, rule)][-ROUNDS:]), flush=True)
    lines = ["# The jax backend's matmul and einsum gradient rules against JAX's own, 2 CPU devices, data parallel",
             "", f"`python bench/probe_jax_gradient_layout.py --processes {args.processes} --write` "
             f"({time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s, 2-core shared VM, JAX 0.10.2): samples/s, "
             f"the median of {args.processes} processes x {ROUNDS} rounds each, min - max after it.", "",
             "| model (op swapped) | own rule | JAX's rule | own / JAX's |", "|---|---|---|---|"]
    for model, what in (("mlp", "MLP (matmul)"), ("gpt", "GPT (einsum)")):
        own, theirs = rates[(model, "own")], rates[(model, "jax")]
        lines.append(f"| {what} | {statistics.median(own):,.0f} ({min(own):,.0f} - {max(own):,.0f}) | "
                     f"{statistics.median(theirs):,.0f} ({min(theirs):,.0f} - {max(theirs):,.0f}) | "
                     f"{statistics.median(own) / statistics.median(theirs):.2f}x |")
    print("\n".join(lines))
    if args.write:
        (HERE / "RESULTS_jax_gradients.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
