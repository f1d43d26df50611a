"""The engine paths (baseline, optimized): their values, the vLLM arguments each implies on a
CPU or a GPU, where each goes (the memory plans) and the compile cache they key."""
