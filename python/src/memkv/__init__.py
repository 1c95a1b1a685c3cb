"""memkv memory stores for the anthropic SDK's memory tool (`memory_20250818`).

```py
from memkv import MemkvMemoryTool, MemkvSearchTool

memory = MemkvMemoryTool("dana", db="memory.redb")  # memkv in this process
search = MemkvSearchTool("dana", db="memory.redb")  # memkv's memory_search, over the same store
# or a memkv server: MemkvMemoryTool("dana", base_url=...) (MEMKV_URL / MEMKV_API_KEY)
client.beta.messages.tool_runner(model=..., max_tokens=..., messages=..., tools=[memory, search])
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from ._errors import MemkvError, MemkvServeError, MemkvTimeoutError, MemkvConnectionError, MemkvLockedError

# The rest is imported when first used: `import memkv` (and the `memkv` command, which lives in
# this package) does not pay for importing the anthropic SDK (about a second) until a tool is.
_LAZY = {
    "MemkvMemoryTool": "._tool",
    "AsyncMemkvMemoryTool": "._tool",
    "MemkvSearchTool": "._search",
    "AsyncMemkvSearchTool": "._search",
    "SEARCH_TOOL_DEFINITION": "._search",
    "serve_local": "._serve",
    "LocalServer": "._serve",
    "find_binary": "._serve",
    "Database": "._local",
    "IN_MEMORY": "._local",
}

if TYPE_CHECKING:
    from ._tool import MemkvMemoryTool, AsyncMemkvMemoryTool
    from ._search import MemkvSearchTool, AsyncMemkvSearchTool, SEARCH_TOOL_DEFINITION
    from ._serve import LocalServer, find_binary, serve_local
    from ._local import Database, IN_MEMORY


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memkv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "__version__",
    "MemkvMemoryTool",
    "AsyncMemkvMemoryTool",
    "MemkvSearchTool",
    "AsyncMemkvSearchTool",
    "SEARCH_TOOL_DEFINITION",
    "Database",
    "IN_MEMORY",
    "serve_local",
    "LocalServer",
    "find_binary",
    "MemkvError",
    "MemkvConnectionError",
    "MemkvTimeoutError",
    "MemkvServeError",
    "MemkvLockedError",
]
