"""BackupAndRestore: resume a killed ``fit`` at its last saved step."""
import os

from .. import engine, env
from ..errors import CheckpointError, ConfigError
from ..framework import checkpoint_format as checkpoint
from .callback import Callback


class BackupAndRestore(Callback):
    """Resume a killed ``fit`` at its last saved step (Keras' callback resumes at the start of an epoch).

        backup = flow.callbacks.BackupAndRestore("/tmp/backup", save_freq=100)
        model.fit(x, y, epochs=10, callbacks=[backup])   # killed? run the same command again

    Each save holds the weights, the optimizer's slots and step, the seed and the
    data position (epoch, batches done in it, the epoch's running metric sums);
    the rerun skips the batches already done, in the same order, and ends with
    the weights an uninterrupted run ends with.  ``save_freq``: ``"epoch"`` or
    every N training steps.  ``delete_checkpoint``: remove the backup once
    ``fit`` completes.  Keras' ``double_checkpoint=True`` is refused by name: a
    backup is committed whole or not at all, so a kill mid-save leaves the one
    before it readable.

    Exact resumption needs the rerun to see the same data in the same order:
    numpy input is shuffled from the seed (``flow.config.set_seed``); a
    ``tf.data.Dataset`` must shuffle with a seed, ``ds.shuffle(n, seed=1)``.
    A seeded shuffle reorders each epoch, and the rerun replays the epochs
    before the resumed one so that it gets its own order back.  A backup is
    refused (CheckpointError, nothing loaded) if the rerun's data has other
    batches per epoch, ``batch_size`` or, for a dataset, other element shapes
    or dtypes.

    Order check (Keras' callback has none): a save every N steps also holds a
    fingerprint of the batches the epoch trained on so far (their arrays'
    dtypes, shapes and bytes: ``models.batch_fingerprint``); the rerun fingerprints the batches it skips and raises
    CheckpointError (no step taken, the backup kept as it was) where they
    differ: another shuffle seed, another ``tf.random.set_seed``, an unseeded
    shuffle (a new order in every process: it cannot be replayed) or
    reordered arrays would otherwise train some samples twice and others
    never.  ``check_order=False`` resumes on such batches anyway.  Only a
    backup that saves mid-epoch pays for it, one hash of each batch; a backup
    saved without a fingerprint (an older one) resumes unchecked.
    """

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint=False, delete_checkpoint=True,
                 check_order=True):
        super().__init__()
        for name, value in (("double_checkpoint", double_checkpoint), ("delete_checkpoint", delete_checkpoint),
                            ("check_order", check_order)):
            if not isinstance(value, bool):
                raise ConfigError(f"BackupAndRestore: {name} expected True or False, received {value!r}")
        if double_checkpoint:
            raise ConfigError("BackupAndRestore: double_checkpoint=True (Keras' second, older backup for a latest one "
                              "a kill left unreadable) is not taken: flowlayers commits each backup whole or not at "
                              "all, so a kill leaves the previous one readable; expected double_checkpoint=False")
        if not backup_dir:
            raise ConfigError(f"BackupAndRestore: backup_dir expected a directory path, received {backup_dir!r}")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq <= 0):
            raise ConfigError(f"BackupAndRestore: save_freq expected 'epoch' or a positive int (steps), received "
                              f"{save_freq!r}")
        self.backup_dir, self.save_freq, self.delete_checkpoint = os.fspath(backup_dir), save_freq, delete_checkpoint
        self.check_order = bool(check_order)
        self._path = os.path.join(self.backup_dir, "latest")

    def on_train_begin(self, logs=None):
        self._steps_seen = self.model.optimizer.iterations
        fit_state = self.model.trainer.fit_state
        # a save mid-epoch holds the fingerprint of the epoch's batches done: the rerun checks the ones it skips
        fit_state.fingerprinting, fit_state.check_order = self.save_freq != "epoch", self.check_order
        if not checkpoint.exists(self._path):
            return
        where = f"BackupAndRestore({self.backup_dir!r})"
        state = checkpoint.Reader(self._path).state
        seed = state.get("rng", {}).get("seed")
        if seed != fit_state.seed:
            raise CheckpointError(f"{where}: expected a backup of a run with flow.config.set_seed({fit_state.seed}), "
                                  f"received one of seed {seed}; rerun with the same seed, or delete the backup")
        if "position" not in state:
            raise CheckpointError(f"{where}: expected a backup written by BackupAndRestore, received a checkpoint "
                                  f"without a training position in {self._path!r}")
        fit_state.resume(state["position"], where)
        self.model.trainer.load_checkpoint(self._path)
        self._steps_seen = self.model.optimizer.iterations

    def on_train_batch_end(self, batch, logs=None):
        # every save_freq steps; a hook may end several steps (steps_per_execution): then when they passed one
        before, self._steps_seen = self._steps_seen, self.model.optimizer.iterations
        if self.save_freq != "epoch" and self._steps_seen // self.save_freq > before // self.save_freq:
            self._save(end_of_epoch=False)
            env.restart_point()     # the launcher may start the job again here, from this backup (--elastic)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(end_of_epoch=True)
            env.restart_point()

    def _save(self, end_of_epoch):
        """The backup: where the fit is, with the fit's seed (not one set since it started)."""
        trainer = self.model.trainer
        trainer.save_checkpoint(self._path, trainer.fit_state.position(end_of_epoch), seed=trainer.fit_state.seed)

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and env.process_index() == 0:    # one process removes it, for all
            checkpoint.remove(self._path)
            if os.path.isdir(self.backup_dir) and not os.listdir(self.backup_dir):
                os.rmdir(self.backup_dir)
        engine.barrier(f"BackupAndRestore({self.backup_dir!r}) done")
