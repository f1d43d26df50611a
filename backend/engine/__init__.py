"""The engine room: the interface the app talks to, vLLM behind it, and how each path is started.

* ``protocol``: ``Engine``, ``EngineRequest``, the events a turn yields, ``EngineInfo``.
* ``metrics`` and ``stats``: a turn's figures from vLLM's request statistics; engine-wide figures.
* ``vllm``: ``VllmEngine``, vLLM's ``AsyncLLM`` in this process; ``env`` and ``log`` around it.
* ``model_source``: ``--model`` / ``--demo`` to a checkpoint directory and its drafter.
* ``paths`` and ``platform``: the engine paths as values, the vLLM arguments each implies here.
* ``speculation``: the optimized path's speculation, chosen by measurement.
* ``factory`` and ``pool``: settings to an unstarted engine; the session's engines, one per path.
* ``prompt_sets``: the prompt sets shipped in ``assets/`` as engine requests.
"""
