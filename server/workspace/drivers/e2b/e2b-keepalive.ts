/**
 * Keeps a sandbox's E2B timeout ahead of its use, so E2B never pauses or kills it mid-turn. Every
 * operation `touch`es it: when less than half of the timeout is left, it is set again from now (awaited
 * only when less than a quarter is left, so a busy workspace pays nothing). While an operation runs (a long
 * command), `hold` refreshes it every third of the timeout. Failures are swallowed: a sandbox that is gone
 * makes the operation itself fail, with a better message.
 */
export class SandboxKeepAlive {
  private expiresAt: number;
  private holds = 0;
  private timer: NodeJS.Timeout | null = null;
  private pending: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly refresh: (timeoutMs: number) => Promise<boolean>,
    private readonly timeoutMs: number,
    /** When the timeout was last set (by the provision or the connect that attached). */
    setAt: number = Date.now(),
  ) {
    this.expiresAt = setAt + timeoutMs;
  }

  async touch(): Promise<void> {
    if (this.closed) return;
    const left = this.expiresAt - Date.now();
    if (left > this.timeoutMs / 2) return;
    const refreshing = this.refreshNow();
    if (left < this.timeoutMs / 4) await refreshing;
  }

  /** Keeps the timeout fresh until the returned release is called. */
  hold(): () => void {
    this.holds++;
    this.timer ??= setInterval(() => void this.refreshNow(), Math.max(1_000, this.timeoutMs / 3));
    this.timer.unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      if (this.holds === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private refreshNow(): Promise<void> {
    this.pending ??= this.refresh(this.timeoutMs)
      .then(
        (running) => {
          if (running) this.expiresAt = Date.now() + this.timeoutMs;
        },
        () => undefined,
      )
      .finally(() => {
        this.pending = null;
      });
    return this.pending;
  }
}
