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
  /** Optional aim in words, e.g. "≤ 3×", printed next to the ratio (informational). */
  goal?: string;
  /** A target the ratio must meet: a missed one is printed as MISSED and fails `npm run bench`. */
  target?: BenchTarget;
};

/** The ratio's bound: `atMost` for costs (lower is better), `atLeast` for throughputs. */
export type BenchTarget = { atMost: number } | { atLeast: number };

/** True when the ratio meets its target (always true without one). */
export function meetsTarget(r: Pick<BenchResult, "ratio" | "target">): boolean {
  if (!r.target) return true;
  return "atMost" in r.target ? r.ratio <= r.target.atMost : r.ratio >= r.target.atLeast;
}

/** The target as printed: `≤ 2×`. */
export function describeTarget(target: BenchTarget): string {
  return "atMost" in target ? `≤ ${target.atMost}×` : `≥ ${target.atLeast}×`;
}

export type BenchModule = { run(): Promise<BenchResult[]> };

export function result(fields: Omit<BenchResult, "ratio">): BenchResult {
  return {
    ...fields,
    ratio: fields.baselineValue === 0 ? Number.POSITIVE_INFINITY : fields.value / fields.baselineValue,
  };
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

/** Median of a list of numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The value at `fraction` (0.5: p50, 0.99: p99) of `values`, nearest-rank. */
export function percentile(values: readonly number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(Math.ceil(fraction * sorted.length) - 1, 0))] ?? NaN;
}
