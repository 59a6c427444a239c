"""The counting core: what a state store call becomes, and the process's one emitter.

* ``accessors`` -- the wrappers around the Task SDK's state store accessors: one counter add
  per completed call;
* ``contracts`` -- the Protocols between the wrappers, the emitter and the backends;
* ``deltas`` -- what travels from the emitter to a backend;
* ``runtime`` -- ``configure()`` and the process-wide emitter the wrappers count into.

The emitter (``store_metrics.emitter``) and the backends (``store_metrics.backends``) sit
beside this package: the wrappers know only the contracts.
"""
