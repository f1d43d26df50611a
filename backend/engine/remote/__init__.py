"""A vLLM server as the engine: the engine, its wire format, its checks, media and HTTP."""
