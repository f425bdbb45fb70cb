import { processBerth } from "@/server/composition/process-berth";
import { getConfig } from "@/server/config/config";
import { markMachineIdle, reserveWarmMachines } from "@/server/modules/pool/warm-pool.data";
import { newWarmMachineId } from "@/server/modules/pool/warm-pool.service";
import { startWorkerRuntime } from "@/workers/runtime";
import { percentile, result, type BenchResult } from "./lib";
import { startStack, type BenchStack } from "./service/stack";

/**
 * A new workspace through the platform (issue 26: "a workspace in under 50 ms, whoever it is for"): the
 * real tRPC handler over HTTP with an API key, real workers in this process, the `local` driver
 * (bubblewrap), PostgreSQL and Redis. Each use creates a session (untimed), then times its first
 * `workspace.files.write`, which provisions the session's workspace, attaches it and writes a file; the
 * floor is a second write to the same workspace right after. Measured twice, each on its own stack:
 * with no pool (the workers create the machine) and with a warm pool filled beforehand (the API's gate
 * binds a pooled machine, server/modules/pool/warm-first-use.service.ts). RUNS sequential first uses and a
 * burst of RUNS at once, each way.
 */
const RUNS = Number(process.env.BERTH_BENCH_POOL_RUNS ?? 100);

type Figures = { sequential: number[]; floor: number[]; burst: number[] };

export async function run(): Promise<BenchResult[]> {
  const cold = await measure(null);
  const warm = await measure(RUNS * 2);
  const p = (values: number[], fraction: number) => percentile(values, fraction).toFixed(1);
  return [
    result({
      name: "first use through the API, warm pool (p50)",
      value: percentile(warm.sequential, 0.5),
      unit: "ms",
      baseline: "one more write to the same workspace right after (p50)",
      baselineValue: percentile(warm.floor, 0.5),
      goal: `p50 < 50 ms, p99 < 100 ms; measured p99 ${p(warm.sequential, 0.99)} ms`,
    }),
    result({
      name: `first use through the API: ${RUNS} sequential, warm pool (p50)`,
      value: percentile(warm.sequential, 0.5),
      unit: "ms",
      baseline: `${RUNS} sequential first uses with no pool (p50)`,
      baselineValue: percentile(cold.sequential, 0.5),
      goal: `cold p99 ${p(cold.sequential, 0.99)} ms, warm p99 ${p(warm.sequential, 0.99)} ms`,
    }),
    result({
      name: `first use through the API: a burst of ${RUNS}, warm pool (p50)`,
      value: percentile(warm.burst, 0.5),
      unit: "ms",
      baseline: `a burst of ${RUNS} first uses with no pool (p50)`,
      baselineValue: percentile(cold.burst, 0.5),
      goal: `cold p99 ${p(cold.burst, 0.99)} ms, warm p99 ${p(warm.burst, 0.99)} ms`,
    }),
  ];
}

/** One stack's figures: with no pool (`poolSize` null) or a local pool filled to `poolSize` first. */
async function measure(poolSize: number | null): Promise<Figures> {
  // The bench's one tenant makes 2 × RUNS + 1 workspaces within a minute: no quota may refuse them.
  const unlimited = String(10 * RUNS + 100);
  const env: Record<string, string | undefined> = {
    BERTH_WARM_POOLS: poolSize === null ? undefined : `local:1-${poolSize}`,
    BERTH_QUOTA_LIVE_WORKSPACES: unlimited,
    BERTH_QUOTA_TOTAL_WORKSPACES: unlimited,
    BERTH_QUOTA_PROVISIONS_PER_MINUTE: unlimited,
  };
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  const assign = (values: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  assign(env);
  const stack = await startStack();
  const workers = await startWorkerRuntime({
    redis: getConfig().redis,
    workers: { concurrency: 4, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: processBerth().log,
    healthPort: null,
    schedules: [],
  });
  try {
    const api = new BenchApi(stack);
    // Untimed: module loads, the first sandbox, the tRPC handler's first requests.
    await api.firstUse();
    if (poolSize !== null) await fill(poolSize);
    const figures: Figures = { sequential: [], floor: [], burst: [] };
    for (let i = 0; i < RUNS; i++) {
      const { first, again } = await api.firstUse();
      figures.sequential.push(first);
      figures.floor.push(again);
    }
    if (poolSize !== null) await fill(poolSize);
    const sessions = await Promise.all(Array.from({ length: RUNS }, () => api.newSession()));
    figures.burst = await Promise.all(sessions.map((workspaceId) => api.timedWrite(workspaceId)));
    return figures;
  } finally {
    await workers.stop();
    await stack.close();
    assign(saved);
  }
}

/** Tops the installation's `local` pool up to `size` idle machines (untimed). */
async function fill(size: number): Promise<void> {
  const { db, engine } = processBerth();
  const driver = engine.drivers.forKind("local");
  const key = await driver.warmPoolKey!();
  for (const id of await reserveWarmMachines("local", key, size, newWarmMachineId, db))
    await markMachineIdle(id, await driver.createIdleMachine!(id), db);
}

/** The bench's calls, as a typed client would make them (tRPC over HTTP, `Authorization: Bearer`). */
class BenchApi {
  private agentId: string | null = null;

  constructor(private readonly stack: BenchStack) {}

  async firstUse(): Promise<{ first: number; again: number }> {
    const workspaceId = await this.newSession();
    const first = await this.timedWrite(workspaceId);
    return { first, again: await this.timedWrite(workspaceId) };
  }

  async newSession(): Promise<string> {
    // A workspace per session, so each session's first write is its workspace's first use.
    this.agentId ??= (
      (await this.call("agent.create", {
        name: "bench-per-session",
        modelConfig: { provider: "openai-compatible", model: "bench" },
        isolationPolicy: "PER_SESSION",
      })) as { id: string }
    ).id;
    const created = await this.call("session.create", { agentId: this.agentId });
    return (created as { workspaceId: string }).workspaceId;
  }

  async timedWrite(workspaceId: string): Promise<number> {
    const started = performance.now();
    await this.call("workspace.files.write", { workspaceId, path: "first.txt", content: "hello" });
    return performance.now() - started;
  }

  private async call(procedure: string, input: unknown): Promise<unknown> {
    const response = await fetch(`${this.stack.berth.url}/api/trpc/${procedure}`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.stack.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ json: input }),
    });
    if (!response.ok) throw new Error(`${procedure}: HTTP ${response.status} ${await response.text()}`);
    return ((await response.json()) as { result: { data: { json: unknown } } }).result.data.json;
  }
}
