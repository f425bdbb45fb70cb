/**
 * A single-consumer async queue: the turn pushes events as they happen, chat.send's stream drains them in
 * order. `close()` ends the iteration after what is buffered; `fail(error)` ends it with that error.
 */
export class EventChannel<T> {
  private readonly buffered: T[] = [];
  private wake: (() => void) | null = null;
  private closed = false;
  private failure: { error: unknown } | null = null;
  private lastPushAt = Date.now();

  /** How long since the last item was pushed. */
  idleMs(): number {
    return Date.now() - this.lastPushAt;
  }

  push(item: T): void {
    if (this.closed) return;
    this.lastPushAt = Date.now();
    this.buffered.push(item);
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  fail(error: unknown): void {
    this.failure ??= { error };
    this.close();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const next = this.buffered.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.closed) {
        if (this.failure) throw this.failure.error;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }
}
