"""``flow.train.CheckPoint``: OneFlow's checkpoint of every job-function variable and optimizer state.

    ckpt = flow.train.CheckPoint()
    ckpt.init()            # fresh initial values for every variable
    ckpt.save("ckpt_dir")  # weights, each train job's optimizer slots and step, the random seed
    ckpt.load("ckpt_dir")  # in any view, mesh or device count; returns {train job name: its step}

Resuming a job-function loop after a crash: save every few steps, and on start
load the last save if there is one; ``load`` gives back each train job's step,
so the loop goes on from there.  With the same seed, and batches that depend
only on the step, the resumed run ends with the weights of an uninterrupted one::

    ckpt = flow.train.CheckPoint()
    start = ckpt.load("ckpt")["train_job"] if ckpt.exists("ckpt") else 0
    for step in range(start, total_steps):
        train_job(*batch(step))
        if (step + 1) % 100 == 0:
            ckpt.save("ckpt")

The format is the one ``model.save_weights`` writes (``flowlayers.framework.checkpoint_format``);
a job's optimizer slots are keyed ``<job name>/<optimizer name>/<variable path>/<slot>``.
Unlike ``model.load_weights``, ``load`` takes a checkpoint holding variables
that no job uses (a training checkpoint loaded by a predict-only program, as
OneFlow does) and warns naming them.
"""
from . import job, settings
from .framework import checkpoint_format as checkpoint
from .framework.variable import store


class CheckPoint:
    def init(self):
        """Give every job-function variable (and optimizer state) its initial value again.

        Values are drawn when a job next runs, in that job's view and devices.
        """
        for var in list(store.variables.values()) + list(checkpoint.slot_variables(self._optimizers()).values()):
            var.forget()
        for opt, _ in self._optimizers().values():
            opt.iterations = 0

    @staticmethod
    def _optimizers():
        """owner -> (optimizer, variables it trains) for every built train job."""
        out = {}
        for fn in job.registered():
            if fn._compiled and fn._compiled[1].optimizer is not None:
                program = fn._compiled[1]
                out[f"{fn.__name__}/{program.optimizer.name}"] = (program.optimizer, program.trainable)
        return out

    @staticmethod
    def exists(path):
        """Whether ``path`` holds a checkpoint (also one a killed save left beside it, recovered when read)."""
        return checkpoint.exists(path)

    def save(self, path):
        optimizers = self._optimizers()
        variables = dict(store.variables)
        variables.update(checkpoint.slot_variables(optimizers))
        checkpoint.save(path, variables, checkpoint.state(optimizers, settings.seed()))

    def load(self, path):
        """Restore every variable and each train job's optimizer state; returns ``{train job name: step}``.

            steps = ckpt.load("ckpt")      # e.g. {"train_job": 300}

        Every job is built first (in the view in force), so its variables and slots exist to restore into.
        """
        for fn in job.registered():
            fn.build()
        checkpoint.restore(path, dict(store.variables), self._optimizers(), extra_weights="warn")
        return {fn.__name__: fn._compiled[1].optimizer.iterations for fn in job.registered()
                if fn._compiled[1].optimizer is not None}
