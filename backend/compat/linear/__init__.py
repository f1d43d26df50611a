"""Patches for linear layers: the bfloat16 kernel, row-exact verification, embedding packing."""
