/**
 * Benchmark plumbing shared by every `bench/*.bench.ts`. Each figure is a ratio against a baseline measured
 * in the same run on the same machine, so results compare across machines.
 */
export type BenchResult = {
  name: string;
  value: number;
  unit: string;
  /** What the value is compared with, in words. */
  baseline: string;
  baselineValue: number;
  /** value / baselineValue (lower is better unless the name says otherwise). */
  ratio: number;
  /** Optional target, e.g. "≤ 3×", printed next to the ratio. */
  goal?: string;
};

export type BenchModule = { run(): Promise<BenchResult[]> };

export function result(fields: Omit<BenchResult, "ratio">): BenchResult {
  return {
    ...fields,
    ratio: fields.baselineValue === 0 ? Number.POSITIVE_INFINITY : fields.value / fields.baselineValue,
  };
}

/** Nanoseconds per call of a synchronous function: warm up, then the best of several timed rounds. */
export function nsPerOp(fn: () => unknown, iterations = 1_000_000, rounds = 7): number {
  for (let i = 0; i < Math.min(iterations, 100_000); i++) fn();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) fn();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / iterations);
  }
  return best;
}

/** Nanoseconds per awaited call of an async function (sequential, so it measures latency per call). */
export async function nsPerAsyncOp(
  fn: () => Promise<unknown>,
  iterations = 200_000,
  rounds = 7,
): Promise<number> {
  for (let i = 0; i < Math.min(iterations, 50_000); i++) await fn();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await fn();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / iterations);
  }
  return best;
}

/** Milliseconds of one async run, best of `rounds` (each round gets a fresh `setup`). */
export async function bestMs<T>(
  rounds: number,
  setup: () => Promise<T>,
  fn: (input: T) => Promise<unknown>,
): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    const input = await setup();
    const start = process.hrtime.bigint();
    await fn(input);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return best;
}

/** Median of a list of numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
