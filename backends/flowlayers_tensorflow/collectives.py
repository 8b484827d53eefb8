"""The collectives of the mirrored view: the replicas' gradients summed inside a step, and host values gathered or
summed over the processes of a job (``StrategyRuntime``'s, made from its devices, ordering tokens and keys).

Logical CPU devices share the host's memory: each tensor is summed once, on the first device, and the others read
the sum without a copy.  GPUs use collectives, small tensors packed.  Several processes: what the replicas agree on
goes through one collective between the processes' first devices (a collective group of all replicas, two per
process, never completes on CPU: measured, DeadlineExceeded); on CPUs every replica's values, summed in replica
order as in one process; on GPUs each process's sum.
"""
import itertools

import numpy as np
import tensorflow as tf

PACK_BYTES = 256 * 1024    # tensors this large are all-reduced alone, smaller ones packed together
# group and instance keys of the steps' own collectives: apart from MirroredStrategy's (counted from 1 + base)
_group_keys = itertools.count(2_000_000_000, -1)
_instance_keys = itertools.count(1_000_000_000)


def next_group_key():
    return next(_group_keys)


class Collectives:
    """What a strategy runtime (``devices``, ``num_replicas``, ``first``, ``cluster``, ``native_nchw``,
    ``group_key`` and one ordering token per device, ``_tokens``) sums and gathers."""

    def all_reduce(self, per_device):
        """Sum each position of ``per_device`` (one list of tensors per device) over the devices, inside a step.

        Logical CPU devices share the host's memory: each tensor is summed once, on the first device, and the
        others read the sum without a copy, where a ring collective copies and adds chunk by chunk.  Nothing is
        packed: copying tensors into and out of one vector cost more than it saved (both measured:
        bench/RESULTS_design.md).  GPUs use collectives, small tensors packed (``collective_all_reduce``).
        Several processes: on CPUs, summed in replica order as one process sums them (``_in_replica_order``); on
        GPUs summed on this process's first device (a collective group of this process's devices alone would need a
        key of its own per process), then over the processes (``_across_processes``).
        """
        if self.cluster and not self.native_nchw:
            return [self._in_replica_order(per_device)] * len(per_device)
        if self.native_nchw and not self.cluster:
            return self.collective_all_reduce(per_device)
        with tf.device(self.devices[0]):
            totals = [tf.add_n(list(tensors)) for tensors in zip(*per_device)]
        if self.cluster:    # then over the processes, between their first devices
            totals = self._across_processes(totals)
        return [totals] * len(per_device)

    def _in_replica_order(self, per_device):
        """Each position of ``per_device`` summed over every replica of every process, in replica order: the sums
        of one process of as many devices, bit for bit.  One collective of a (replicas, length) buffer of zeros that
        each process fills at its replicas' rows (adding zeros is exact) hands every process all rows, which are then
        summed in order.  It moves every replica's gradients, where ``_across_processes`` moves one sum per process:
        for CPU hosts, the stand-in for GPUs."""
        before, after = self.first, self.num_replicas - self.first - len(per_device)

        def in_order(rows):
            zeros = [tf.zeros([k, rows.shape[1]], rows.dtype) for k in (before, after)]
            every = self._process_collective(tf.concat([zeros[0], rows, zeros[1]], 0), [self._tokens[0].handle])
            return tf.add_n(tf.unstack(every))
        return self._rows_by_dtype(per_device, in_order)

    def _across_processes(self, tensors):
        """Each of ``tensors`` (on this process's first device) summed over the processes, inside a step: one
        collective per dtype."""
        return self._rows_by_dtype([tensors], lambda rows: self._process_collective(rows[0], [self._tokens[0].handle]))

    def _rows_by_dtype(self, per_device, reduce_rows):
        """On this process's first device, per dtype: each replica's tensors flattened into one row, the rows stacked
        and reduced by ``reduce_rows`` to one vector, which is split back into the tensors of ``per_device[0]``'s
        shapes."""
        out, by_dtype = list(per_device[0]), {}
        for j, t in enumerate(per_device[0]):
            by_dtype.setdefault(t.dtype, []).append(j)
        with tf.device(self.devices[0]):
            for js in by_dtype.values():
                rows = tf.stack([tf.concat([tf.reshape(tensors[j], [-1]) for j in js], 0) for tensors in per_device])
                shapes = [per_device[0][j].shape for j in js]
                for j, piece, shape in zip(js, tf.split(reduce_rows(rows), [sh.num_elements() for sh in shapes]),
                                           shapes):
                    out[j] = tf.reshape(piece, shape)
        return out

    def _process_collective(self, flat, token=()):
        """``flat`` summed over the first devices of the processes (one collective group, the same key in all)."""
        return tf.raw_ops.CollectiveReduceV2(input=flat, group_size=self.cluster.count, group_key=self.group_key,
                                             instance_key=next(_instance_keys), ordering_token=list(token),
                                             merge_op="Add", final_op="Id")

    def _process_sum(self, array):
        """A host array summed over the processes (every process calls this in the same order)."""
        array = np.asarray(array)
        cast = array.dtype == np.bool_
        with tf.device(self.devices[0]):
            total = self._process_collective(tf.constant(array.astype(np.int32) if cast else array)).numpy()
        return total.astype(np.bool_) if cast else total

    def _gathered(self, parts):
        """Every replica's part, in replica order, from this process's ``parts`` (whole in every process): their
        shapes first, then their values, each in a buffer of zeros that every process fills at its parts' place."""
        rank, n, mine = parts[0].ndim, self.num_replicas, slice(self.first, self.first + len(parts))
        shapes = np.zeros((n, rank), np.int64)
        shapes[mine] = [p.shape for p in parts]
        shapes = self._process_sum(shapes)
        sizes = [int(np.prod(s)) for s in shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        flat = np.zeros(offsets[-1], parts[0].dtype)
        flat[offsets[mine.start]:offsets[mine.stop]] = np.concatenate([p.ravel() for p in parts])
        flat = self._process_sum(flat)
        return [flat[offsets[i]:offsets[i + 1]].reshape(shapes[i]) for i in range(n)]

    def collective_all_reduce(self, per_device):
        """``all_reduce`` by collectives: one per tensor of ``PACK_BYTES`` or more, one per dtype for the rest."""
        return self._packed(per_device, self._collective)

    def _collective(self, flats):
        instance, out = next(_instance_keys), []
        for device, flat, token in zip(self.devices, flats, self._tokens):
            with tf.device(device):
                out.append(tf.raw_ops.CollectiveReduceV2(
                    input=flat, group_size=self.num_replicas, group_key=self.group_key, instance_key=instance,
                    ordering_token=[token.handle], merge_op="Add", final_op="Id"))
        return out

    def _packed(self, per_device, reduce_flat):
        """Each dtype's small tensors flattened into one vector per device and reduced together by ``reduce_flat``
        (a reduction per tensor costs a rendezvous or a cross-device edge each: hundreds for a deep model), then
        split back.  A tensor of ``PACK_BYTES`` or more is reduced alone: packing it would copy it in and out for
        nothing, and alone its reduction starts as soon as the replicas have it, while the backward pass goes on."""
        out = [list(tensors) for tensors in per_device]
        packed = {}
        for j, t in enumerate(per_device[0]):
            if t.shape.num_elements() * t.dtype.size >= PACK_BYTES:
                for i, reduced in enumerate(reduce_flat([tensors[j] for tensors in per_device])):
                    out[i][j] = reduced
            else:
                packed.setdefault(t.dtype, []).append(j)
        for js in packed.values():
            shapes = [per_device[0][j].shape for j in js]
            flats = []
            for i, device in enumerate(self.devices):
                with tf.device(device):
                    flats.append(tf.concat([tf.reshape(per_device[i][j], [-1]) for j in js], 0))
            for i, (device, flat) in enumerate(zip(self.devices, reduce_flat(flats))):
                with tf.device(device):
                    pieces = tf.split(flat, [s.num_elements() for s in shapes])
                    for j, piece, shape in zip(js, pieces, shapes):
                        out[i][j] = tf.reshape(piece, shape)
        return out
