"""memkv memory stores for the anthropic SDK's memory tool (`memory_20250818`).

```py
from memkv import MemkvMemoryTool

memory = MemkvMemoryTool("dana")  # MEMKV_URL / MEMKV_API_KEY
search = MemkvSearchTool("dana")  # memkv's memory_search, over the same store
client.beta.messages.tool_runner(model=..., max_tokens=..., messages=..., tools=[memory, search])
```
"""

from ._wire import __version__
from ._tool import MemkvMemoryTool, AsyncMemkvMemoryTool
from ._search import MemkvSearchTool, AsyncMemkvSearchTool, SEARCH_TOOL_DEFINITION
from ._serve import LocalServer, find_binary, serve_local
from ._errors import MemkvError, MemkvServeError, MemkvTimeoutError, MemkvConnectionError

__all__ = [
    "__version__",
    "MemkvMemoryTool",
    "AsyncMemkvMemoryTool",
    "MemkvSearchTool",
    "AsyncMemkvSearchTool",
    "SEARCH_TOOL_DEFINITION",
    "serve_local",
    "LocalServer",
    "find_binary",
    "MemkvError",
    "MemkvConnectionError",
    "MemkvTimeoutError",
    "MemkvServeError",
]
