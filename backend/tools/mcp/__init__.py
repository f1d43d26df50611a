"""Tools from Model Context Protocol servers: their configuration (``config``), the host that runs
their sessions in the background (``host``), and the bridge from MCP's tools and results to
gemma-chat's (``bridge``)."""
