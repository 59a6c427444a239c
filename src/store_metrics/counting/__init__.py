"""The counting core: what a state store call becomes, and the process's one emitter.

* ``accessors`` -- the wrappers around the Task SDK's state store accessors: one counter add
  per completed call;
* ``stores`` -- the Protocols that say what a state store accessor is;
* ``reads`` -- what a read shares with the traced wrappers;
* ``tracing`` -- the traced wrappers' methods (imported only when a wrapper is traced);
* ``runtime`` -- ``configure()`` and the process-wide emitter the wrappers count into.

The layers point one way. Below this package: the contracts (``store_metrics.contracts``) and the
deltas (``store_metrics.deltas``), which the emitter (``store_metrics.emitter``) and the backends
(``store_metrics.backends``) import too; the wrappers know only the contracts. ``runtime`` sits
above the emitter and the backends: it builds them.
"""
