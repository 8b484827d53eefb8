"""What every backend needs and would otherwise write again: the front end's own meanings, written once.

A backend imports from flowlayers only ``contract`` (the types it is handed), ``errors``, ``sbp`` and this package:
a Backend class's calls handed to its package's modules (``modules``), the kernel table helpers
(``kernel_tables``), what executables and kernel contexts answer alike (``executable``), splitting a batch over
replicas and micro-batches (``batching``), exported endpoints (``exporting``), steps run stage by stage (``staged``), the recurrent cells', the normalisations' and image sampling's arithmetic
(``recurrent``, ``norms``, ``images``), and optimizer rules for engines without in-place update (``functional``).
"""
from ..optimizers import functional  # noqa: F401  (re-exported: optimizer rules for functional engines)
from .batching import micro_batch_bounds, micro_batches, replica_rows
from .devices import device_count_error
from .executable import Executable, KernelContext, step_by_step
from .exporting import exported_inputs, leaves, nested, tensor_name
from .images import into_image
from .kernel_tables import CustomKernels, add_kernel, check_backend, op_names, op_seed, reshaped
from .modules import EngineModules
from .norms import batch_norm, layer_norm
from .recurrent import rnn_cell, rnn_inputs
from .staged import Stage, StagedSteps, placement_stages

__all__ = ["Executable", "KernelContext", "CustomKernels", "add_kernel", "op_names", "check_backend",
           "step_by_step", "micro_batches", "micro_batch_bounds", "replica_rows", "op_seed", "reshaped",
           "device_count_error", "functional", "leaves", "nested", "exported_inputs", "tensor_name", "Stage",
           "placement_stages", "StagedSteps", "rnn_inputs", "rnn_cell", "batch_norm", "layer_norm", "into_image",
           "EngineModules"]
