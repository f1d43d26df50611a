"""Native kernels gemma-chat compiles for the optimized engine path.

* ``bf16_linear.c``: bfloat16 linear layers for CPUs without native bfloat16 arithmetic,
  bit-identical to PyTorch's own result there, 2-4x faster (see the file's header).
* ``build``: compiles a kernel with the system's C compiler into the cache directory.
* ``bf16_linear``: loads it, checks it reproduces PyTorch on this machine, and wraps it
  as a PyTorch operator that vLLM's compiled model can call.
"""
