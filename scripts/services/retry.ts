/**
 * Retries `attempt` with exponential backoff until it resolves or `timeoutMs` passes; the last error is
 * rethrown. This is how services are awaited: by connecting, never by sleeping a guessed duration.
 */
export async function retryUntil<T>(
  what: string,
  attempt: () => Promise<T>,
  options: {
    timeoutMs?: number;
    initialDelayMs?: number;
    maxDelayMs?: number;
    isFatal?: () => Error | undefined;
  } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let delay = options.initialDelayMs ?? 50;
  for (;;) {
    const fatal = options.isFatal?.();
    if (fatal) throw fatal;
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() + delay > deadline) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new Error(`${what}: not ready after ${options.timeoutMs ?? 30_000} ms (${reason})`, {
          cause: error,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, options.maxDelayMs ?? 1_000);
    }
  }
}
