import { loadRedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { TENANT_DEFAULT_ISOLATION, assignSessionWorkspaceId } from "@/server/modules/session/session.policy";
import { getQueues } from "@/server/queue/queues";
import { getRedis, redisKey } from "@/server/redis";
import { median, percentile, result, type BenchResult } from "./lib";
import { serveBare } from "./service/bare-handler";
import { measureJobPickup } from "./service/job-pickup";
import { load, sqlPerRequest, type HttpTarget, type LoadFigures } from "./service/load";
import { type Inflight } from "./service/inflight";
import { type SqlLog, watchSql } from "./service/sql-log";
import { startStack } from "./service/stack";

/**
 * The service under load, against the machine's PostgreSQL and Redis (DATABASE_URL / REDIS_URL, or the
 * local defaults; a throwaway database and Redis prefix):
 * - `session.create` and the `workspace.get` hot path through the real tRPC handler over HTTP with a Bearer
 *   API key, as requests/s and p99 under autocannon, against a bare node:http handler issuing the same
 *   SQL statements (checked per request) and Redis commands: the ratio is Berth's framework cost;
 * - job pickup latency through Berth's queue and worker factories against a raw LPUSH → BRPOP.
 */
export async function run(): Promise<BenchResult[]> {
  const stack = await startStack();
  const sql = watchSql();
  const workspaceIdFor = (agentId: string) =>
    assignSessionWorkspaceId(TENANT_DEFAULT_ISOLATION, stack.scope, agentId);
  try {
    const bare = await serveBare(
      {
        db: getDb(),
        redis: getRedis(),
        auditQueue: getQueues().get("audit"),
        auditBufferKey: redisKey(stack.redisPrefix, "audit", "buffer"),
        workspaceIdFor,
      },
      stack.inflight,
    );
    try {
      const auth = { authorization: `Bearer ${stack.apiKey}` };
      const json = { ...auth, "content-type": "application/json" };
      const create = {
        berth: {
          url: `${stack.berth.url}/api/trpc/session.create`,
          method: "POST",
          headers: json,
          body: JSON.stringify({ json: { agentId: stack.agentId } }),
        },
        bare: {
          url: `${bare.url}/session.create`,
          method: "POST",
          headers: json,
          body: JSON.stringify({ agentId: stack.agentId }),
        },
      } satisfies Record<string, HttpTarget>;

      // The session's workspace record: created (PENDING, nothing provisioned) by Berth's own session.create.
      const first = await fetch(create.berth.url, create.berth);
      if (!first.ok) throw new Error(`session.create: HTTP ${first.status} ${await first.text()}`);
      const created = (await first.json()) as { result: { data: { json: { workspaceId: string } } } };
      const workspaceId = created.result.data.json.workspaceId;
      if (workspaceId !== workspaceIdFor(stack.agentId)) {
        throw new Error("the bare handler would bind sessions to another workspace than Berth");
      }
      const input = encodeURIComponent(JSON.stringify({ json: { workspaceId } }));
      const get = {
        berth: {
          url: `${stack.berth.url}/api/trpc/workspace.get?input=${input}`,
          method: "GET",
          headers: auth,
        },
        bare: { url: `${bare.url}/workspace.get?workspaceId=${workspaceId}`, method: "GET", headers: auth },
      } satisfies Record<string, HttpTarget>;

      return [
        ...(await compare("session.create", create, sql, stack.inflight)),
        ...(await compare("workspace.get", get, sql, stack.inflight)),
        ...(await jobPickup()),
      ];
    } finally {
      await bare.close();
    }
  } finally {
    sql.stop();
    await stack.close();
  }
}

/**
 * Both servers live in this process and share one Prisma pool; autocannon runs on a worker thread.
 * Two interleaved rounds, best of each side, so a noisy neighbour on the machine does not decide the ratio.
 */
async function compare(
  procedure: string,
  targets: { berth: HttpTarget; bare: HttpTarget },
  sql: SqlLog,
  inflight: Inflight,
): Promise<BenchResult[]> {
  const berthSql = await sqlPerRequest(sql, targets.berth, inflight);
  const bareSql = await sqlPerRequest(sql, targets.bare, inflight);
  if (Math.abs(berthSql - bareSql) >= 0.5) {
    throw new Error(
      `${procedure}: Berth sends ${berthSql} SQL statements per request, the baseline ${bareSql}`,
    );
  }
  let berth: LoadFigures | undefined;
  let baseline: LoadFigures | undefined;
  for (let round = 0; round < 2; round++) {
    berth = best(berth, await load(targets.berth, inflight));
    baseline = best(baseline, await load(targets.bare, inflight));
  }
  const baselineText = `bare node:http handler, same ${Math.round(bareSql)} SQL statements (Prisma) and Redis commands`;
  return [
    result({
      name: `service ${procedure} throughput (higher is better)`,
      value: berth!.rps,
      unit: "req/s",
      baseline: baselineText,
      baselineValue: baseline!.rps,
      goal: "≥ 0.5×",
    }),
    result({
      name: `service ${procedure} p99 under load`,
      value: berth!.p99Ms,
      unit: "ms",
      baseline: baselineText,
      baselineValue: baseline!.p99Ms,
      goal: "≤ 2×",
    }),
  ];
}

function best(previous: LoadFigures | undefined, next: LoadFigures): LoadFigures {
  if (!previous) return next;
  return {
    rps: Math.max(previous.rps, next.rps),
    p99Ms: Math.min(previous.p99Ms, next.p99Ms),
    requests: previous.requests + next.requests,
  };
}

async function jobPickup(): Promise<BenchResult[]> {
  const { samplesMs, baselineSamplesMs } = await measureJobPickup(loadRedisConfig());
  const baselineText = `raw ioredis LPUSH → BRPOP on another connection, ${baselineSamplesMs.length} sequential`;
  return [
    result({
      name: "service job pickup (median)",
      value: median(samplesMs),
      unit: "ms",
      baseline: baselineText,
      baselineValue: median(baselineSamplesMs),
    }),
    result({
      name: "service job pickup (p99)",
      value: percentile(samplesMs, 0.99),
      unit: "ms",
      baseline: baselineText,
      baselineValue: percentile(baselineSamplesMs, 0.99),
    }),
  ];
}
