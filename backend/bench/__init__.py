"""Parts of ``gemma-chat bench``: machine roofs, model costs, the plain-PyTorch peer, workloads."""
