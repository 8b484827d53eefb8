"""Whether XLA's compiled program holds the plan's Boxing, over the whole op x SBP signature matrix.

    FLOWLAYERS_BACKEND=jax python tools/plan_vs_engine.py              # every op, on meshes "2" and "2x2"
    FLOWLAYERS_BACKEND=jax python tools/plan_vs_engine.py matmul add   # some ops

For each op of ``tests/parallel/test_signatures.py`` and each of its meshes, one job holding every signature the
op offers (as that test builds it, one training step run) is compiled, and the collectives of its program are
compared with the plan's (``tests/parallel/test_compiled_program.py`` reads both).  Prints one line per program:
``ok``, or what only the engine and only the plan have, or why the comparison could not be made; then a count.
Takes a few minutes on 2 CPU cores.
"""
import collections
import os
import sys

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests")
os.environ.setdefault("FLOWLAYERS_CPU_DEVICES", "4")
sys.path[:0] = [os.path.join(TESTS, "parallel"), TESTS]

import jax  # noqa: E402
import test_compiled_program as compiled_program  # noqa: E402
import test_signatures as signatures  # noqa: E402
from flowlayers.parallel import report  # noqa: E402


def compare(name, mesh):
    """``(engine only, plan only)`` collectives of the op's job on ``mesh``."""
    built = []
    build = report.build
    report.build = lambda compiled, batch: built.append(build(compiled, batch)) or built[-1]
    try:
        signatures.run(name, signatures.assignments(name, mesh), mesh, plan=[])
    finally:
        report.build = build
    plan = built[-1]
    engine = [c for c in compiled_program.engine_collectives(plan.compiled_program(), plan.axes) if c[2] > 1]
    want = compiled_program.planned(plan, jax.devices()[0].platform)
    engine, want = collections.Counter(engine), collections.Counter(want)
    return sorted((engine - want).elements()), sorted((want - engine).elements())


def main(names):
    differ = 0
    for name in names or sorted(signatures.CASES):
        for mesh_name, mesh in signatures.MESHES.items():
            try:
                engine_only, plan_only = compare(name, mesh)
            except AssertionError as e:         # a Boxing the comparison does not split
                differ += 1
                print(f"{name:20} {mesh_name:4} not compared: {str(e).splitlines()[0][:160]}")
                continue
            if engine_only or plan_only:
                differ += 1
                print(f"{name:20} {mesh_name:4} engine only {engine_only}; plan only {plan_only}")
            else:
                print(f"{name:20} {mesh_name:4} ok")
    print(f"{differ} programs differ or were not compared")


if __name__ == "__main__":
    main(sys.argv[1:])
