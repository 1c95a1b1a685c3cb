// `NODE_OPTIONS=--import=.../sdk-current/register.mjs`: every import of @anthropic-ai/sdk in the
// process, and in the node processes it starts, loads the SDK installed here (package-lock.json)
// instead of the one in ../node_modules. tools/test-typescript.sh runs the compiled package, its
// tests and the examples a second time this way; see resolve.mjs.
import { register } from 'node:module';

register('./resolve.mjs', import.meta.url);
