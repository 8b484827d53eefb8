"""Steps run stage by stage where ops are placed on some devices (``flow.scope.placement``)."""
import numpy as np



class Stage:
    """Consecutive ops of one placement (None: all devices), with the Blobs they read from outside (``inputs``)
    and those later stages or the step's results read (``outputs``)."""

    def __init__(self, placement):
        self.placement, self.nodes, self.inputs, self.outputs = placement, [], [], []


def placement_stages(program):
    """``program``'s ops cut where the placement changes (``flow.scope.placement`` on some devices), in the
    program's (topological) order, for an engine that runs each stage as a program of its own on its devices and
    copies what crosses between them: placeholders and variables are inputs of the stages reading them."""
    stages = []
    for node in program.nodes:
        if node.op.kind in ("placeholder", "variable"):
            continue
        if not stages or stages[-1].placement != node.placement:
            stages.append(Stage(node.placement))
        stages[-1].nodes.append(node)
    made_in = {b: k for k, s in enumerate(stages) for n in s.nodes for b in n.outputs}
    wanted = set(program.results)
    for k, stage in enumerate(stages):
        stage.inputs = list(dict.fromkeys(x for n in stage.nodes for x in n.inputs if made_in.get(x) != k))
        for later in stages[k + 1:]:
            wanted.update(x for n in later.nodes for x in n.inputs if made_in.get(x) == k)
    for k, stage in enumerate(stages):
        stage.outputs = [b for n in stage.nodes for b in n.outputs if b in wanted]
    return stages


class StagedSteps:
    """The loop of a step run stage by stage (``placement_stages``), for a backend's executable (a mixin): each
    micro-batch forward through the stages in order, then backward through them in reverse, each variable's
    gradient summed where the variable lives and each Blob's cotangent where the Blob was made.  The executable
    has ``program``, ``plan(batch)`` and ``_stages``, and writes the engine's half:

    - ``_stage_input(stage, x, value, plan, values)``: what ``stage`` reads for Blob ``x`` (``value``: its feed or
      an earlier stage's output, None for a variable; ``values``: what the executable handed ``staged_run``);
    - ``_stage_step(stage, step)``: the step counter on the stage's devices;
    - ``_functions(k, size, plan, diff)``: stage ``k``'s (forward, backward) for micro-batches of ``size`` rows,
      the inputs marked in ``diff`` differentiated;
    - ``_run_forward(stage, forward, d_args, c_args, at)``: the stage's outputs;
    - ``_loss_cotangent(loss, scale)``: the loss's cotangent (``scale`` per element), or None where the engine's
      backward takes ``scale`` itself;
    - ``_run_backward(stage, backward, d_args, c_args, at, given, scale, watched)``: (the gradients of the
      differentiated inputs, of the watched Blobs), from ``given`` (the cotangents of the stage's floating
      outputs, None: none), ``scale`` (where the stage makes the loss and ``_loss_cotangent`` gave None, else
      None) and ``watched`` (the values of the watched Blobs it makes, ``flow.watch_diff``);
    - ``_add_gradient(path, g, held)``: a variable's gradient ``g`` added to ``held`` (None: the first);
    - ``_cotangent_as(g, value)``: ``g`` where ``value``, the Blob's own value, lives.
    """

    def staged_run(self, sizes, chunks, step, values=None):
        """(per micro-batch the Blobs each made, ``{variable path: gradient}``, the watched Blobs' gradients, of
        the first micro-batch) of the micro-batches ``chunks`` of ``sizes`` rows."""
        p = self.program
        trained = {v.path for v in p.trainable}
        runs = [self._staged_forward(size, chunk, step, values, trained) for size, chunk in zip(sizes, chunks)]
        grads, watched = {}, []
        if p.loss is not None:
            count = sum(int(np.prod(env[p.loss].shape)) for env, _ in runs)
            for k, (env, calls) in enumerate(runs):
                seen = self._staged_backward(env, calls, 1.0 / count, grads)
                if k == 0:
                    watched = [seen[b] for b in p.gradients]
        return [env for env, _ in runs], grads, watched

    def _differentiable(self, blob, trained):
        """Whether the step differentiates ``blob``: a floating Blob an op made, or a trained variable's."""
        if not blob.dtype.is_floating or self.program.loss is None:
            return False
        if blob.node.op.kind == "variable":
            return blob.node.variable.path in trained
        return blob.node.op.kind != "placeholder"

    def _staged_forward(self, size, chunk, step, values, trained):
        """One micro-batch through the stages: (Blob -> value where it was made, per stage what its backward
        takes)."""
        p = self.program
        plan = self.plan(size)
        env, calls = dict(zip(p.inputs, chunk)), []
        for k, stage in enumerate(self._stages):
            args = [self._stage_input(stage, x, env.get(x), plan, values) for x in stage.inputs]
            diff = tuple(self._differentiable(x, trained) for x in stage.inputs)
            forward, backward = self._functions(k, size, plan, diff)
            at = self._stage_step(stage, step)
            d_args = [a for a, d in zip(args, diff) if d]
            c_args = [a for a, d in zip(args, diff) if not d]
            env.update(zip(stage.outputs, self._run_forward(stage, forward, d_args, c_args, at)))
            calls.append((stage, diff, backward, d_args, c_args, at))
        return env, calls

    def _staged_backward(self, env, calls, scale, grads):
        """The gradients of one micro-batch, stages in reverse, each variable's added into ``grads``.  Returns
        each watched Blob's gradient."""
        p = self.program
        seed = self._loss_cotangent(env[p.loss], scale)
        cts, seen = ({} if seed is None else {p.loss: seed}), {}
        for stage, diff, backward, d_args, c_args, at in reversed(calls):
            floating = [b for b in stage.outputs if b.dtype.is_floating]
            watched = [b for b in p.gradients if b in stage.outputs]
            given = [cts.get(b) for b in floating]
            own = scale if seed is None and p.loss in stage.outputs else None
            if not watched and (not d_args or (all(c is None for c in given) and own is None)):
                continue
            d_grads, w_grads = self._run_backward(stage, backward, d_args, c_args, at, given, own,
                                                  [env[b] for b in watched])
            seen.update(zip(watched, w_grads))
            for x, g in zip([x for x, d in zip(stage.inputs, diff) if d], d_grads):
                if x.node.op.kind == "variable":
                    path = x.node.variable.path
                    grads[path] = self._add_gradient(path, g, grads.get(path))
                else:
                    g = self._cotangent_as(g, env[x])
                    cts[x] = g if x not in cts else cts[x] + g
        return seen
