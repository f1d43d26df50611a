"""Speculative decoding for the optimized path, chosen by measurement.

* ``choice``: the choice from measured figures, and where it is kept per model and machine.
* ``probe``: the engines that measure those figures.
"""
