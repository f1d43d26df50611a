"""Process lifetime: every process gemma-chat starts ends with it, however it ends.

* ``owner``: the ``gemma-chat`` process marks itself the owner (``GEMMA_CHAT_OWNER``), turns
  SIGTERM / SIGHUP into an orderly way out, and at exit ends every descendant still running.
* ``watchdog``: each Python process it starts (vLLM's engine core and workers, multiprocessing's
  resource tracker) notices when its parent is gone — even after a SIGKILL — and ends itself.
* ``mcp_guard``: each stdio MCP server runs under a small guard that adopts the server's
  orphans (a child subreaper) and ends the whole tree when the server, the app or the guard ends.
* ``descendants``: finding and ending a process's descendants through ``/proc``.

Standard library only: the watchdog runs in every interpreter the app starts, before anything else.
"""
