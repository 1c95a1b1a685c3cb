/**
 * The errors of this package. A model mistake (a bad path, a missing file, ...) is never one of
 * these: memkv answers it with `is_error: true`, and the handlers turn that into the SDK's
 * `ToolError`. These are for the operator: the server could not be reached, refused the request,
 * or answered something that is not memkv's tool route.
 */

/** Every error this package throws. */
export class MemkvError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MemkvError';
  }
}

/** memkv serve could not be reached, the connection broke, or no answer came in time. */
export class MemkvConnectionError extends MemkvError {
  /** Whether the request was abandoned because it took longer than the configured timeout. */
  readonly timedOut: boolean;

  constructor(message: string, options: { cause?: unknown; timedOut?: boolean } = {}) {
    super(message, { cause: options.cause });
    this.name = 'MemkvConnectionError';
    this.timedOut = options.timedOut ?? false;
  }
}

/**
 * `db` names a database file that another process has open for writing (one process at a time
 * may write one). The message says what to do instead: serve it, or open it read-only.
 */
export class MemkvLockedError extends MemkvError {
  constructor(message: string) {
    super(message);
    this.name = 'MemkvLockedError';
  }
}

/**
 * memkv serve answered with an HTTP error (or memkv in this process refused the same request,
 * with the same status and envelope): the Anthropic-style envelope
 * `{"type":"error","error":{"type":"...","message":"..."}}`, or a body that is not memkv's.
 */
export class MemkvAPIError extends MemkvError {
  /** The HTTP status, e.g. 401. */
  readonly status: number;
  /** The envelope's `error.type`, e.g. `authentication_error`; `null` when the body had none. */
  readonly errorType: string | null;
  /** Seconds from a `Retry-After` header (429, 503), or `null`. */
  readonly retryAfter: number | null;

  constructor(
    status: number,
    errorType: string | null,
    detail: string,
    retryAfter: number | null = null,
    from = 'memkv serve',
  ) {
    super(`${from} answered ${status}${errorType ? ` ${errorType}` : ''}: ${detail}`);
    this.name = 'MemkvAPIError';
    this.status = status;
    this.errorType = errorType;
    this.retryAfter = retryAfter;
  }
}
