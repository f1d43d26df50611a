"""The runs that start engines to measure them: the speculation probe and drafts by load
(``paths --measure``)."""
