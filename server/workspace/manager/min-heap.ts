/** A binary min-heap keyed by a number: push and pop are O(log n), peek is O(1). */
export class MinHeap<T> {
  private readonly items: Array<{ key: number; value: T }> = [];

  get size(): number {
    return this.items.length;
  }

  push(key: number, value: T): void {
    const items = this.items;
    items.push({ key, value });
    let index = items.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (items[parent]!.key <= key) break;
      items[index] = items[parent]!;
      index = parent;
    }
    items[index] = { key, value };
  }

  peekKey(): number | undefined {
    return this.items[0]?.key;
  }

  pop(): { key: number; value: T } | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && items[right]!.key < items[left]!.key ? right : left;
      if (items[child]!.key >= last.key) break;
      items[index] = items[child]!;
      index = child;
    }
    items[index] = last;
    return top;
  }

  clear(): void {
    this.items.length = 0;
  }
}
