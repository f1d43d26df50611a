"""vLLM's engine in this process: the engine itself, its log, its start-up stages and the
environment its engine core is started with."""
