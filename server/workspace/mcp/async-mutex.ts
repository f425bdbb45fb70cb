/**
 * A FIFO async mutex: `run` executes its callback once every earlier callback has settled. Used to
 * serialise mutations of one MCP scope or one skill partition without blocking unrelated ones.
 */
export class AsyncMutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    // The chain must never reject, or every later task would see the rejection instead of running.
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** One AsyncMutex per key, dropped again when idle so the map does not grow with every key ever seen. */
export class KeyedMutex {
  private readonly locks = new Map<string, { mutex: AsyncMutex; holders: number }>();

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let lock = this.locks.get(key);
    if (!lock) {
      lock = { mutex: new AsyncMutex(), holders: 0 };
      this.locks.set(key, lock);
    }
    lock.holders += 1;
    try {
      return await lock.mutex.run(task);
    } finally {
      lock.holders -= 1;
      if (lock.holders === 0) this.locks.delete(key);
    }
  }
}
