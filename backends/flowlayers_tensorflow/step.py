"""The body of a step, shared by both views: the forward pass of each micro-batch, the loss, the gradients, and
the outputs.  The mirrored view runs it on each replica (its rows; gradients of its local loss sum), the
consistent view once on DTensor (the logical batch; gradients of the mean loss, in the loss's placement)."""
import contextlib

import tensorflow as tf

from .lowering import run_graph


def forward_backward(program, chunks, handles, contexts, loss_scope=contextlib.nullcontext, mean=False,
                     loss_scale=None, replicas=1):
    """Run ``program`` on ``chunks`` (one feed list per micro-batch, each with its LoweringContext of
    ``contexts``) as independent chains that meet in the summed loss.  Returns ``(envs, element count, gradients
    of the trainable variables, gradients of the watched Blobs)``: gradients of the loss sum, or with ``mean`` of
    the mean over the elements; ``loss_scope()`` is where the sums are made.  Without a loss, only the first
    chunk runs and there are no gradients.  ``loss_scale`` (the optimizer's, a variable): the gradients of the
    trainable variables are of the loss times it (the rule divides them again); the watched ones are not.  Then a
    loss sum (one of ``replicas`` replicas' rows) is differentiated as its mean over the ``replicas`` times its
    count, each example's loss weighing what it weighs on one device, so that float16 meets the gradients (and
    overflows) it meets there; the gradients are made those of the sum again in float32."""
    p = program
    envs = [dict(zip(p.inputs, feeds)) for feeds in chunks]
    if p.loss is None:
        run_graph(p, envs[0], handles, contexts[0])
        return envs, tf.constant(0.0), [], []
    trainable = [handles[v.path] for v in p.trainable]
    with tf.GradientTape() as tape:
        tape.watch(trainable)       # also variables made while frozen (created with trainable=False)
        if p.gradients:     # a watched Blob made from the batch alone is recorded only from watched feeds on
            tape.watch([f for env in envs for x, f in env.items() if x.dtype.is_floating])
        sums, counts = [], []
        for env, ctx in zip(envs, contexts):
            run_graph(p, env, handles, ctx)
            loss = tf.cast(env[p.loss], tf.float32)
            with loss_scope():
                sums.append(tf.reduce_sum(loss))
                counts.append(tf.cast(tf.size(loss), tf.float32))
        with loss_scope():
            total, size = summed(sums), summed(counts)
            target = total / size if mean else total
            scale = factor = None if loss_scale is None else tf.cast(loss_scale, tf.float32)
            if scale is not None:
                factor = scale if mean else scale / (size * replicas)
                target = target * factor
    grads = tape.gradient(target, trainable + [envs[0][b] for b in p.gradients],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    grads = [tf.convert_to_tensor(g) for g in grads]
    trained, watched = grads[:len(trainable)], grads[len(trainable):]
    if scale is not None:
        watched = [w / tf.cast(factor, w.dtype) for w in watched]
        if not mean:        # the scaled gradients of the sum
            trained = [g * tf.cast(size * replicas, g.dtype) for g in trained]
    return envs, size, trained, watched


def outputs(program, envs, scope=lambda blob: contextlib.nullcontext()):
    """Each output of ``program``: a ``"sum"`` output summed over the micro-batches' elements (made in
    ``scope(blob)``), any other the first micro-batch's value."""
    out = []
    for blob, mode in zip(program.outputs, program.output_modes):
        with scope(blob):
            out.append(summed([tf.reduce_sum(env[blob]) for env in envs]) if mode == "sum" else envs[0][blob])
    return out


def summed(parts):
    """The sum of a list of tensors (the one tensor itself when alone: no op)."""
    return parts[0] if len(parts) == 1 else tf.add_n(parts)
