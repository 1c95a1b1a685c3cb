"""memkv memory stores for the anthropic SDK's memory tool (`memory_20250818`).

```py
from memkv import MemkvMemoryTool

memory = MemkvMemoryTool("dana")  # MEMKV_URL / MEMKV_API_KEY
client.beta.messages.tool_runner(model=..., max_tokens=..., messages=..., tools=[memory])
```
"""

from ._wire import __version__
from ._tool import MemkvMemoryTool, AsyncMemkvMemoryTool
from ._serve import LocalServer, find_binary, serve_local
from ._errors import MemkvError, MemkvServeError, MemkvTimeoutError, MemkvConnectionError

__all__ = [
    "__version__",
    "MemkvMemoryTool",
    "AsyncMemkvMemoryTool",
    "serve_local",
    "LocalServer",
    "find_binary",
    "MemkvError",
    "MemkvConnectionError",
    "MemkvTimeoutError",
    "MemkvServeError",
]
