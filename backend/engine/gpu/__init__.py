"""The card: what it is, how the two paths share its memory, its context window, the vLLM
arguments and attention a card implies."""
