// The module-resolution hook that register.mjs installs. A bare `@anthropic-ai/sdk` specifier,
// with or without a subpath, is resolved as if it were imported from this directory, so from
// ./node_modules; the SDK's own imports (relative, and its dependencies) then stay in that copy.
// Everything else resolves as usual. Only the place the SDK comes from changes: the code that
// runs is the package's build, the tests' and the examples', unchanged.
const HERE = new URL('./package.json', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier === '@anthropic-ai/sdk' || specifier.startsWith('@anthropic-ai/sdk/')) {
    return nextResolve(specifier, { ...context, parentURL: HERE });
  }
  return nextResolve(specifier, context);
}
