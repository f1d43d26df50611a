"""A stdio MCP server that is hard to end, for the process-lifetime tests:
``python tests/hostile/hostile_mcp_server.py PIDFILE``.

It starts a plain child and a child in a session of its own (``setsid``, as a daemon would), writes
its own pid and theirs to PIDFILE (one per line), answers ``initialize`` and ``tools/list``, and
then ignores both EOF on stdin and SIGTERM: only SIGKILL ends it. With ``kill-guard`` after
PIDFILE it also SIGKILLs its parent (gemma-chat's guard) once it has listed its tools.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def main(pidfile: str, kill_guard: bool = False) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    plain = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    detached = subprocess.Popen(
        ["sleep", "601"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    with open(pidfile + ".partial", "w") as out:
        out.write(f"{os.getpid()}\n{plain.pid}\n{detached.pid}\n")
    os.replace(pidfile + ".partial", pidfile)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        result: dict[str, object] = {}
        if message.get("method") == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
        elif message.get("method") == "tools/list":
            result = {"tools": []}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
        sys.stdout.flush()
        if kill_guard and message.get("method") == "tools/list":
            os.kill(os.getppid(), signal.SIGKILL)
    while True:  # EOF: a well-behaved server would exit here
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["kill-guard"])
