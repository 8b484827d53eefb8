"""Steps whose tensors go back from placements on some devices to all devices, around a cycle of placements, or
between placements of different sizes (consistent view): the copies between meshes done outside DTensor's step
functions.

DTensor (TF 2.21) runs a step function that spans several meshes as one function per mesh, each waiting for the
others' tensors, and such steps never finish (``placements.py`` says which; ``bench/probe_dtensor_placements.py``
reproduces the hang).  Here a step is cut into stages, each a run of consecutive ops of one placement
(``backend_common.placement_stages``), each its own step function on one mesh: the placement's (every tensor whole
on each of its devices) or all devices' (laid out as planned).  A tensor crossing from one stage to a later one is
copied between the functions, eagerly (gathered whole, ``dtensor.copy_to_mesh``), and its gradient copied back.

The backward pass runs the stages in reverse, each a function that computes its stage's forward again under a
``GradientTape`` (its activations are not kept between functions; dropout draws depend on (seed, op, step) only,
so they repeat) and takes the gradients of its outputs' cotangents.  The optimizer step is the consistent view's
own: every device applies the rule to the blocks it holds.
"""
import functools

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from flowlayers.backend_common import StagedSteps, micro_batches, placement_stages
from flowlayers.errors import ConfigError, FlowLayersError

from .consistent import ConsistentExecutable
from .graph_options import step_options
from .lowering import DTensorContext, LoweringContext, _run_node


class StageContext(DTensorContext):
    """The lowering context of one stage's function: its inputs are on its mesh already, and so is the step
    counter it is handed."""

    def random_uniform(self, shape, op_name, op_seed=None):
        draw = LoweringContext.random_uniform(self, shape, op_name, op_seed)
        return dtensor.relayout(draw, self.runtime.replicated(draw.shape.rank, self.mesh))


class StagedExecutable(StagedSteps, ConsistentExecutable):
    """The consistent view's executable for a step run stage by stage: the stages' loop is
    ``backend_common.StagedSteps``; here each stage's step function on its mesh and the copies between them."""
    def _check_placements(self):
        p = self.program
        if p.state:
            placed = next(n for n in p.nodes if n.placement is not None)
            raise ConfigError(f"{p.name!r}: op {placed.name!r} is placed on devices "
                              f"{','.join(f'0:{d}' for d in placed.placement)} and its tensors go back to all "
                              f"devices (or between placements); expected an optimizer without a loss scale for "
                              f"such a step, which the tensorflow backend runs stage by stage; drop the loss scale "
                              f"(mixed precision's LossScaleOptimizer), or put the ops after the placement in one")
        self._stages = placement_stages(p)

    def _retrace(self):
        super()._retrace()
        self._stage_fns = {}

    def __call__(self, feeds, handles, lr=0.0, step=1):
        p, rt = self.program, self.runtime
        self._bind(handles)
        chunks = micro_batches(feeds, p.micro_batches if p.loss is not None else 1)
        batch = tuple(len(c[0]) if c and np.ndim(c[0]) else None for c in chunks)
        try:
            with step_options(cpu=not rt.native_nchw):
                outs, grads, updates = self._staged(batch, chunks, step)
            results, grads, updates = self._on_host(outs, grads, updates)
            if grads or updates:
                self._run_update(batch, grads, updates, lr, step)
            return results
        except FlowLayersError:
            raise
        except tf.errors.OpError as e:
            raise rt.wrap_error(p, e, self._traced_graphs()) from None

    def _traced_graphs(self):
        """The graphs traced so far, the stages' functions too: DTensor's errors name an op type, found in them."""
        fns = [f for pair in self._stage_fns.values() for f in pair]
        return super()._traced_graphs() + [c.graph for f in fns for c in f._list_all_concrete_functions()]

    # Where a stage's values live ----------------------------------------
    def _mesh(self, stage):
        return self.runtime.mesh_for(stage.placement)

    def _moved(self, tensor, mesh):
        """``tensor`` whole on each device of ``mesh``: gathered whole on its own mesh, then, for another mesh, one
        device's copy sent to each of that mesh's devices and packed there (``dtensor.copy_to_mesh`` from a mesh to
        a larger one hangs)."""
        rt, rank = self.runtime, tensor.shape.rank
        source = dtensor.fetch_layout(tensor).mesh
        whole = dtensor.relayout(tensor, rt.replicated(rank, source))
        if source == mesh:
            return whole
        one = dtensor.unpack(whole)[0]
        copies = []
        for device in mesh.local_devices():
            with tf.device(device):
                copies.append(tf.identity(one))
        return dtensor.pack(copies, rt.replicated(rank, mesh))

    def _laid_out(self, tensor, layout):
        """``tensor`` in ``layout`` (on that layout's mesh)."""
        if dtensor.fetch_layout(tensor).to_string() == layout.to_string():
            return tensor
        return dtensor.relayout(self._moved(tensor, layout.mesh), layout)

    def _stage_input(self, stage, x, feed, plan, values=None):
        """What ``stage`` reads for Blob ``x``: a host feed placed on its mesh, a variable's value, or a tensor an
        earlier stage made, copied here (``values``: none, the variables are read from their handles)."""
        rt, mesh = self.runtime, self._mesh(stage)
        if x.node.op.kind == "placeholder":
            if stage.placement is not None:
                return rt.to_mesh(np.asarray(feed), rt.replicated(np.ndim(feed), mesh))
            return rt.place(feed, plan.sbp[x])
        if x.node.op.kind == "variable":
            value = tf.convert_to_tensor(self._handles[x.node.variable.path])
        else:
            value = feed
        if dtensor.fetch_layout(value).mesh == mesh:
            return value
        return self._moved(value, mesh)

    # The step ----------------------------------------------------------
    def _staged(self, batch, chunks, step):
        """(outputs read on the host, gradients and state updates laid out as their variables)."""
        p = self.program
        envs, grads, watched = self.staged_run(batch, chunks, step)
        outs = []
        for blob, mode in zip(p.outputs, p.output_modes):
            value = functools.reduce(lambda a, b: a + b, [tf.reduce_sum(env[blob]) for env in envs]) \
                if mode == "sum" else envs[0][blob]
            outs.append(self._moved(value, dtensor.fetch_layout(value).mesh))
        outs += [self._moved(g, dtensor.fetch_layout(g).mesh) for g in watched]
        layouts = {path: self._handles[path].layout
                   for path in [v.path for v in p.trainable] + [v.path for v, _ in p.updates]}
        gradients = [self._laid_out(grads[v.path], layouts[v.path]) if v.path in grads else
                     tf.zeros_like(tf.convert_to_tensor(self._handles[v.path])) for v in p.trainable]
        updates = [self._laid_out(tf.cast(envs[0][b], self._handles[v.path].dtype), layouts[v.path])
                   for v, b in p.updates]
        return outs, gradients, updates

    # The engine's half of StagedSteps -----------------------------------
    def _stage_step(self, stage, step):
        return dtensor.copy_to_mesh(tf.constant(step, tf.float64), self.runtime.replicated(0, self._mesh(stage)))

    def _run_forward(self, stage, forward, d_args, c_args, at):
        with dtensor.default_mesh(self._mesh(stage)):
            return forward(d_args, c_args, at)

    def _loss_cotangent(self, loss, scale):
        return None         # the loss stage's backward takes the scale (``_stage_backward``)

    def _run_backward(self, stage, backward, d_args, c_args, at, given, scale, watched):
        with dtensor.default_mesh(self._mesh(stage)):
            return backward(d_args, c_args, at, given, scale)

    def _add_gradient(self, path, g, held):
        return g if held is None else held + self._laid_out(g, dtensor.fetch_layout(held))

    def _cotangent_as(self, g, value):
        return self._laid_out(g, dtensor.fetch_layout(value))

    def _functions(self, k, size, plan, diff):
        """Stage ``k``'s (forward, backward) step functions for micro-batches of ``size`` rows, the inputs marked
        in ``diff`` differentiated."""
        key = (k, size, diff)
        if key not in self._stage_fns:
            run = functools.partial(self._run_stage, self._stages[k], plan, diff)
            # partials, not lambdas: TF counts traces per code object and warns of "frequent retracing"
            self._stage_fns[key] = (tf.function(run, autograph=False),
                                    tf.function(functools.partial(self._stage_backward, run, self._stages[k]),
                                                autograph=False))
        return self._stage_fns[key]

    def _run_stage(self, stage, plan, diff, d_args, c_args, step, env_out=None):
        p = self.program
        d_inputs = [x for x, d in zip(stage.inputs, diff) if d]
        c_inputs = [x for x, d in zip(stage.inputs, diff) if not d]
        env = {**dict(zip(d_inputs, d_args)), **dict(zip(c_inputs, c_args))}
        ctx = StageContext(p.phase, step, self.seed, self.runtime, plan)
        with ctx.arrived(stage.inputs):
            for node in stage.nodes:
                _run_node(node, env, {}, ctx)
        if env_out is not None:
            env_out.update(env)
        return [env[b] for b in stage.outputs]

    def _stage_backward(self, run, stage, d_args, c_args, step, given, scale):
        """Gradients of the stage's inputs marked differentiable and of its watched Blobs, from the cotangents
        ``given`` to its floating outputs (None: none) and, where it makes the loss, ``scale`` per loss element
        (the mean's 1/count)."""
        p = self.program
        floating = [b for b in stage.outputs if b.dtype.is_floating]
        watched = [b for b in p.gradients if b in stage.outputs]
        env = {}
        with tf.GradientTape() as tape:
            tape.watch(d_args)
            outs = dict(zip(stage.outputs, run(d_args, c_args, step, env_out=env)))
        targets, cts = [], []
        for b, c in zip(floating, given):
            if c is not None:
                targets.append(outs[b])
                cts.append(tf.cast(c, outs[b].dtype))
        if scale is not None:
            loss = outs[p.loss]
            targets.append(loss)
            cts.append(tf.ones_like(loss) * tf.constant(scale, loss.dtype))
        sources = list(d_args) + [env[b] for b in watched]
        if not targets:         # nothing after this stage reaches the loss
            return [tf.zeros_like(s) for s in sources[:len(d_args)]], [tf.zeros_like(s) for s in sources[len(d_args):]]
        found = tape.gradient(targets, sources, output_gradients=cts,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return found[:len(d_args)], found[len(d_args):]
