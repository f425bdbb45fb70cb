/**
 * Counts requests a server is still handling. autocannon stops at its deadline with requests in flight,
 * whose database work goes on: the next measurement waits until they have all finished.
 */
export class Inflight {
  private count = 0;
  private waiters: (() => void)[] = [];

  async track<T>(work: Promise<T>): Promise<T> {
    this.count += 1;
    try {
      return await work;
    } finally {
      this.count -= 1;
      if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
    }
  }

  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}
