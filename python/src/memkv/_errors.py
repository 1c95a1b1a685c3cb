"""The package's own exceptions: operator-side failures, never the model's mistakes.

A model mistake (bad path, missing file, ...) is a tool result with `is_error: true`; the tools
raise the SDK's `ToolError` for it, so the model reads memkv's exact string. Everything here is
something the model did not cause: memkv unreachable, a bad key, a refused request, a server that
would not start.
"""

from __future__ import annotations


class MemkvError(Exception):
    """A request to memkv failed, or memkv could not be reached.

    `status` is the HTTP status (None when no response arrived), `type` the error type of
    memkv's envelope (`authentication_error`, `not_found_error`, ...), of the transport
    (`connection_error`, `timeout_error`) or of an answer that is not memkv's (`protocol_error`,
    `answer_too_large`), `message` the explanation.
    """

    status: int | None
    type: str
    message: str
    retry_after: float | None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        type: str = "error",
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.message = message
        self.retry_after = retry_after
        where = f"HTTP {status} " if status is not None else ""
        super().__init__(f"memkv: {where}{type}: {message}")


class MemkvLockedError(MemkvError):
    """`db=` names a database file that another process has open for writing (one process at a
    time may write one). The message says what to do: serve it, or open it read-only."""


class MemkvConnectionError(MemkvError):
    """No answer from memkv: the connection failed, broke, or timed out.

    The message names the URL and says what is known: a connection that was never made (refused,
    or not made in time) sent nothing; a command whose request was sent but whose answer never
    came, complete, may or may not have been applied (in whole: every memkv command is one
    transaction).
    """


class MemkvTimeoutError(MemkvConnectionError):
    """memkv did not answer within the tool's timeout."""


class MemkvServeError(MemkvError):
    """`serve_local` could not start the server (missing binary, a server that died, ...)."""
