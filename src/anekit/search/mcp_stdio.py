"""MCP over stdio that answers every request it read before it exits.

The MCP SDK's stdio server cancels the requests still in flight when its input ends, so a
client that writes its requests and closes stdin (``anekit mcp ROOT < requests.jsonl``,
a script, a one-shot agent) loses the last answers at random: modelcontextprotocol/
python-sdk#2678, open in the pinned ``mcp`` 2.3.0. :func:`serve_stdio` sits between the
SDK's stdio streams and the server: it passes messages through, notes the id of each
request read and of each answer written, and holds the server's input open after stdin
ends until every request read has its answer (at most :data:`DRAIN_SECONDS`). The MCP
stdio transport says a server should exit when its stdin closes; it still does, once its
answers are out.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["DRAIN_SECONDS", "serve_stdio"]

#: Longest wait, after stdin ends, for the answers to the requests already read; past it
#: the SDK cancels what is left, as it would without this module.
DRAIN_SECONDS = 120.0

_log = logging.getLogger(__name__)


async def serve_stdio(server: Any, *, drain_seconds: float = DRAIN_SECONDS) -> None:
    """Serve ``server`` (an ``mcp.server.mcpserver.MCPServer``) on stdin/stdout."""
    import anyio
    import mcp_types as types
    from mcp.server.stdio import stdio_server

    # The SDK has no public hook between its transport and its server: this is what
    # MCPServer.run_stdio_async does, with read() and write() between the streams.
    lowlevel = server._lowlevel_server
    async with stdio_server() as (stdin, stdout):
        to_server, server_input = anyio.create_memory_object_stream[Any](0)
        server_output, from_server = anyio.create_memory_object_stream[Any](0)
        unanswered: set[Any] = set()
        answered = anyio.Event()

        async def read() -> None:
            nonlocal answered
            async with to_server:
                async for item in stdin:
                    message = getattr(item, "message", None)
                    if isinstance(message, types.JSONRPCRequest):
                        unanswered.add(message.id)
                    elif (cancelled := _cancelled(message, types)) is not None:
                        unanswered.discard(cancelled)  # a cancelled request is never answered
                        answered.set()
                    await to_server.send(item)
                with anyio.move_on_after(drain_seconds) as waited:
                    while unanswered:
                        await answered.wait()
                        answered = anyio.Event()
                if waited.cancelled_caught:
                    _log.warning(
                        "stdin ended; %d request(s) still unanswered after %.0f s are cancelled",
                        len(unanswered),
                        drain_seconds,
                    )

        async def write() -> None:
            async with stdout:
                async for item in from_server:
                    await stdout.send(item)
                    message = item.message
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        unanswered.discard(message.id)
                        answered.set()

        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(write)
            await lowlevel.run(
                server_input, server_output, lowlevel.create_initialization_options()
            )
            server_output.close()  # write() passes on what is left, then ends


def _cancelled(message: Any, types: Any) -> Any:
    """The id of the request that ``message`` cancels (``notifications/cancelled``), or
    None."""
    if not isinstance(message, types.JSONRPCNotification):
        return None
    if message.method != "notifications/cancelled" or not isinstance(message.params, dict):
        return None
    return message.params.get("requestId")
