"""Compilation targets. Each provides what the driver needs and nothing else:

* ``name``, ``base`` (its base context, ``od.CPU`` / ``od.CUDA``) and ``compile_lock``;
* ``typeof(value)``: the numba type of a launch argument;
* ``compile_method(func, typing_context, argtypes, kws) -> (signature, impl key, keepalive)``: compile a
  rewritten callee during the typing of its caller;
* ``compile_kernel(func, argtypes) -> launcher``: compile a rewritten kernel; the launcher's
  ``launch(args, blocks, threads, shmem, stream)`` runs it;
* ``synchronize()``.
"""
