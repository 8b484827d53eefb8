"""Probe, plain TF DTensor (no flowlayers): DTensor's S(i) -> S(j) relayout (an all-to-all) of a tensor of rank 4
or more between two dims other than 0 silently permutes the blocks, on CPU meshes (1-D and 2-D alike).

The bug behind tests/layers/test_existing_layers_on_a_mesh.py's "EinsumDense-heads" case: flowlayers planned
EinsumDense("abc,cde->abde") with its kernel and bias split over ``model`` on ``e`` (output (S(0), S(3)) on the
2x2 ``data x model`` mesh), then the relu's input Boxed to (S(0), S(1)) for the Dense head after it (Boxing
"all-to-all over model").  The einsum and the bias add are exact; the relayout (data,-,-,model) ->
(data,model,-,-) is not.  It is not the einsum, nor the bias broadcast: a bare relayout of a constant does it.
Moves from or to dim 0, and rank-3 tensors, came out exact.  Going through the layout with the moving mesh axis
gathered (all-gather, then a local slice) is exact; flowlayers' tensorflow backend does that
(``lowering.relayout``).

Run: python bench/probe_dtensor_einsum_bias.py   (tensorflow-cpu 2.21.0, 4 logical CPU devices)

Output seen (2026-11-28):

    1. blocks of a (1, 2, 2, 2) tensor, mesh model=2, S(1) -> S(2):
       got  [[0.0, 4.0, 1.0, 5.0], [2.0, 6.0, 3.0, 7.0]]
       want [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0]]
    2. S(i) -> S(j) moves of random shapes (dims 2, 4 or 6) that come out wrong, per mesh and rank:
       model=2: rank 3: 0/36 wrong; rank 4: 34/72 wrong (all with i, j > 0); rank 5: 48/120 wrong (all with i, j > 0)
       data=2 x model=2: rank 3: 0/36 wrong; rank 4: 34/72 wrong (all with i, j > 0); rank 5: 48/120 wrong (all
       with i, j > 0)
    3. the flowlayers lowering of EinsumDense-heads + Dense head, plain DTensor (2x2 mesh, batch 8):
       einsum 6.2e-07, + bias 8.6e-07, relayout S(3)->S(1) 17, relu 9.6, head 29   (max abs error vs float64)
       the same with the relayout through (data,-,-,-): head 1.2e-06

(Which moves with i, j > 0 come out right depends on the shape: (8, 4, 2, 1) S(1) -> S(2) did, as did S(2) <-> S(3)
of (8, 4, 12, 4, 4); in 1 the block holds the right elements in a wrong order.  The backend routes every
such move, right or not, as the rule cannot be read off the shape with confidence.)
"""
import itertools

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

dtensor.initialize_accelerator_system("CPU", num_logical_cpu_devices=4)
U = dtensor.UNSHARDED
MESH1 = dtensor.create_mesh([("model", 2)], device_type="CPU", devices=["CPU:0", "CPU:1"])
MESH2 = dtensor.create_mesh([("data", 2), ("model", 2)], device_type="CPU")


def layout(mesh, *spec):
    return dtensor.Layout(list(spec), mesh)


def placed(mesh, a, spec):
    """The numpy array ``a`` as a DTensor laid out as ``spec``."""
    with dtensor.default_mesh(mesh):
        whole = dtensor.copy_to_mesh(tf.constant(a), layout(mesh, *[U] * a.ndim))
        return dtensor.relayout(whole, layout(mesh, *spec))


def moved(mesh, a, src, dst):
    """``a`` laid out ``src``, relaid out ``dst`` inside a tf.function (as a step does): its blocks, and it whole."""
    t = placed(mesh, a, src)
    with dtensor.default_mesh(mesh):
        out = tf.function(lambda t: dtensor.relayout(t, layout(mesh, *dst)))(t)
        whole = dtensor.relayout(out, layout(mesh, *[U] * a.ndim))
        return [b.numpy() for b in dtensor.unpack(out)], dtensor.unpack(whole)[0].numpy()


def smallest():
    a = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    blocks, _ = moved(MESH1, a, (U, "model", U, U), (U, U, "model", U))
    print("1. blocks of a (1, 2, 2, 2) tensor, mesh model=2, S(1) -> S(2):")
    print("   got ", [b.ravel().tolist() for b in blocks])
    print("   want", [a[:, :, :1].ravel().tolist(), a[:, :, 1:].ravel().tolist()])


def survey():
    print("2. S(i) -> S(j) moves of random shapes (dims 2, 4 or 6) that come out wrong, per mesh and rank:")
    for name, mesh in (("model=2", MESH1), ("data=2 x model=2", MESH2)):
        rng, line = np.random.default_rng(0), []
        for rank in (3, 4, 5):
            wrong = total = 0
            off_zero = True
            for _ in range(6):
                shape = tuple(int(d) for d in rng.choice([2, 4, 6], rank))
                a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
                for i, j in itertools.permutations(range(rank), 2):
                    src, dst = [U] * rank, [U] * rank
                    src[i], dst[j] = "model", "model"
                    bad = not np.array_equal(moved(mesh, a, src, dst)[1], a)
                    wrong, total = wrong + bad, total + 1
                    off_zero &= not bad or (i > 0 and j > 0)
            line.append(f"rank {rank}: {wrong}/{total} wrong" + (" (all with i, j > 0)" if wrong and off_zero
                                                                  else ""))
        print(f"   {name}: " + "; ".join(line))


def einsum_heads():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (8, 4, 6)).astype(np.float32)
    k, b = rng.normal(size=(6, 2, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
    hk, hb = rng.normal(size=(4, 2)).astype(np.float32), rng.normal(size=(2,)).astype(np.float32)
    e = np.einsum("abc,cde->abde", x.astype(np.float64), k)
    r = np.maximum(e + b, 0)
    want = [e, e + b, e + b, r, r @ hk + hb]
    L = lambda *spec: layout(MESH2, *spec)     # noqa: E731

    def lowered(x, k, b, hk, hb, through_gather):
        # as flowlayers lowers it: every planned Blob pinned with a relayout
        e = dtensor.relayout(tf.einsum("abc,cde->abde", x, k), L("data", U, U, "model"))
        added = dtensor.relayout(e + b, L("data", U, U, "model"))
        if through_gather:
            added = dtensor.relayout(added, L("data", U, U, U))
        moved_ = dtensor.relayout(added, L("data", "model", U, U))      # Boxing (S(0), S(3)) -> (S(0), S(1))
        r = tf.nn.relu(moved_)
        z = dtensor.relayout(tf.linalg.matmul(r, hk), L("data", "model", U, U))
        return e, added, moved_, r, tf.nn.bias_add(z, hb)

    args = [placed(MESH2, x, ("data", U, U)), placed(MESH2, k, (U, U, "model")), placed(MESH2, b, (U, "model")),
            placed(MESH2, hk, (U, U)), placed(MESH2, hb, (U,))]
    print("3. the flowlayers lowering of EinsumDense-heads + Dense head, plain DTensor (2x2 mesh, batch 8):")
    for through_gather in (False, True):
        with dtensor.default_mesh(MESH2):
            outs = tf.function(lambda *a: lowered(*a, through_gather))(*args)
            outs = [dtensor.unpack(dtensor.relayout(o, L(*[U] * o.shape.rank)))[0].numpy() for o in outs]
        errors = [float(np.abs(o - w).max()) for o, w in zip(outs, want)]
        if through_gather:
            print(f"   the same with the relayout through (data,-,-,-): head {errors[-1]:.2g}")
        else:
            print("   " + ", ".join(f"{n} {e:.2g}" for n, e in zip(
                ["einsum", "+ bias", "relayout S(3)->S(1)", "relu", "head"], errors)),
                "  (max abs error vs float64)")


if __name__ == "__main__":
    smallest()
    survey()
    einsum_heads()
