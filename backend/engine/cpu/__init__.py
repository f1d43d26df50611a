"""The CPU build: the CPU's class, the optimized path's environment, the KV cache and host memory
for two engines, and the engine processes' memory."""
