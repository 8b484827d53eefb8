"""``flow.train.CheckPoint``: OneFlow's checkpoint of every job-function variable.

    ckpt = flow.train.CheckPoint()
    ckpt.init()            # fresh initial values for every variable
    ckpt.save("ckpt_dir")
    ckpt.load("ckpt_dir")  # in any view, mesh or device count
"""
from . import checkpoint, job
from .framework.variable import store


class CheckPoint:
    def init(self):
        """Give every job-function variable (and optimizer state) its initial value again.

        Values are drawn when a job next runs, in that job's view and devices.
        """
        for var in self._variables().values():
            var._runtime, var._handle = None, None
        for fn in job.registered():
            if fn._compiled and fn._compiled[1].optimizer is not None:
                fn._compiled[1].optimizer.iterations = 0

    def _variables(self):
        variables = dict(store.variables)
        for fn in job.registered():
            if fn._compiled:
                rule = fn._compiled[1].optimizer
                for slots in getattr(rule, "_slot_variables", {}).values():
                    variables.update({s.path: s for s in slots})
        return variables

    def save(self, path):
        steps = {fn.__name__: fn._compiled[1].optimizer.iterations for fn in job.registered()
                 if fn._compiled and fn._compiled[1].optimizer is not None}
        checkpoint.save(path, self._variables(), {"job_iterations": steps})

    def load(self, path):
        for fn in job.registered():
            fn.build()
        extra = checkpoint.load(path, {p: v for p, v in self._variables().items()})
        for fn in job.registered():
            if fn._compiled and fn._compiled[1].optimizer is not None:
                fn._compiled[1].optimizer.iterations = extra.get("job_iterations", {}).get(
                    fn.__name__, fn._compiled[1].optimizer.iterations)
