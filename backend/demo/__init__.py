"""`gemma-chat train-demo`: the demo model and its MTP drafter, trained on the Python standard library."""
