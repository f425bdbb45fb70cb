import { sessionServiceOver } from "@/test/setup/test-berth";
/**
 * Quotas, metering and budgets across two API processes (web replicas: app router, agent services, one
 * engine each) and two worker processes, real Postgres, Redis and bubblewrap workspaces:
 *   - 40 concurrent `chat.send` against `concurrentTurns: 5` → exactly 5 run, 35 refused with the typed
 *     error; the ledger then holds exactly the hand-counted turns, tokens, tool calls, provision and seconds;
 *   - 40 concurrent first turns of 40 PER_SESSION workspaces against `liveWorkspaces: 3` → exactly 3
 *     machines are ever provisioned, 37 turns refused with the typed error;
 *   - a budget of one turn with the hard stop → the 50 % and 100 % alerts are raised once each, the running
 *     workspace is stopped (`stopWorkspaces`), and the next turn is refused with the typed error.
 * 40 at once (20 from each replica) is eight to thirteen times the limits, more than a replica's database
 * pool (8) and the workers' concurrency (4): the admissions race inside each replica and across both, as
 * 200 did at five times the cost. The three tests share the four processes (each start costs seconds of
 * CPU); each has its own tenant, agent and sessions, and reads only its own turns' outcomes and provisions.
 */
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { createAgentService } from "@/server/modules/agent/agent.service";
import { sumUsageSince } from "@/server/modules/metering/metering.data";
import { changeBudget, readTenantUsage } from "@/server/modules/quota/quota-admin.service";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { jobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues, getQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { loadRedisConfig } from "@/server/config/redis";
import { AppError } from "@/server/shared/errors";
import type { FakeTurn, RecordedRequest } from "@/test/fixtures/fake-model/script";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { createTestTenant } from "../db/fixtures";
import { testEngineConfig } from "../workspace/harness";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import type { SendRequest, TurnOutcome } from "./quota-api-process";
import { closeProcessBerth } from "@/server/composition/process-berth";

const SESSIONS = 40;
const API_KEY = "sk-multiprocess-quotas";

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part: { text?: unknown }) => (typeof part.text === "string" ? part.text : "")).join("");
}

/** Polls `probe` until it returns a value that is not undefined, for at most `ms`. */
async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 90_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("quotas, metering and budgets across two API processes", { timeout: 300_000 }, () => {
  let children: Child[] = [];
  let apis: Child[] = [];
  let failed = false;
  let fake: FakeModelServer | undefined;
  let basedir: string;
  let controlDir: string;
  let engine: WorkspaceEngine;
  let quota: QuotaDeps;
  let enqueue: ReturnType<typeof createEnqueue<typeof jobCatalog>>;
  /** Every turn outcome the API processes printed, of every test (each reads its own sessions'). */
  const printed: TurnOutcome[] = [];
  const closers: (() => Promise<unknown>)[] = [];

  /** Two workers and two API replicas on their own prefix, for the whole file. */
  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-quota-")));
    await fs.chmod(basedir, 0o711);
    controlDir = await makeControlDir(basedir);
    const workspacesDir = path.join(basedir, "workspaces");
    const prefix = `${process.env.BERTH_REDIS_PREFIX}-mpquota-${randomBytes(3).toString("hex")}`;
    const env = {
      BERTH_REDIS_PREFIX: prefix,
      BERTH_WORKSPACE_BASEDIR: workspacesDir,
      MP_CONTROL_DIR: controlDir,
      WORKERS_CONCURRENCY: "4",
      LOG_LEVEL: "silent",
      // The budget test's price list: a turn costs one unit (the others set no budget, so no price counts).
      BERTH_METERING_RATES: JSON.stringify({ "*": { turn: 1 } }),
    };
    engine = composeEngine({
      quota: () => processBerth().quota,
      attachTracker: () => processBerth().attachTracker,
      usage: () => processBerth().usage,
      stageSamples: () => processBerth().stageSamples,
      lifecycle: processBerth().lifecycle,
      encryptionKey: processBerth().config.secrets.encryptionKey,
      db: processBerth().db,
      config: testEngineConfig(workspacesDir),
      queues: getQueues(),
      secret: "multiprocess-test-secret",
      log: createLogger({ level: "silent" }),
    });
    // This process' view of the children's Redis (their prefix): counters and the jobs it enqueues.
    const redisConfig = { ...loadRedisConfig(), prefix };
    const connection = createRedisConnection(redisConfig, "producer", "quota-test");
    const queues = createQueues(jobCatalog, {
      connection,
      redis: redisConfig,
      log: createLogger({ level: "silent" }),
    });
    closers.push(
      () => queues.close(),
      () => connection.quit(),
    );
    quota = { redis: connection, redisPrefix: prefix, config: getConfig().quotas };
    enqueue = createEnqueue(queues);

    apis = [startChild("quota-api-process.ts", env), startChild("quota-api-process.ts", env)];
    children = [startChild("worker-process.ts", env), startChild("worker-process.ts", env), ...apis];
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));
    for (const api of apis) {
      void (async () => {
        for (;;) printed.push(JSON.parse(await api.nextLine((line) => line.startsWith("{"))) as TurnOutcome);
      })().catch(() => undefined); // ends when the child exits
    }
  });

  afterEach(async (context) => {
    failed ||= context.task.result?.state === "fail";
    await fake?.close();
    fake = undefined;
  });

  afterAll(async () => {
    await stopChildren(children, failed);
    await engine?.close();
    for (const close of closers.splice(0)) await close().catch(() => undefined);
    await closeProcessBerth();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  /** A tenant with an agent on the fake model and its sessions, and how its turns are sent and seen. */
  async function setUp(options: {
    isolationPolicy: "PER_AGENT" | "PER_SESSION";
    sessions: number;
    respond: (request: RecordedRequest) => FakeTurn | undefined | Promise<FakeTurn | undefined>;
  }) {
    fake = await startFakeModel({ apiKey: API_KEY, respond: options.respond });
    const tenant = await createTestTenant();
    const agent = await createAgentService({
      audit: processBerth().audit,
      db: processBerth().db,
      secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
      enqueueSessionPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      enqueueAgentPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      assertBackendChoosable: () => undefined,
    }).create(tenant.scope, {
      name: `mp-quota-${randomBytes(3).toString("hex")}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: API_KEY },
      isolationPolicy: options.isolationPolicy,
    });
    const sessionService = sessionServiceOver(engine);
    const create = () => sessionService.create(tenant.scope, { agentId: agent.id });
    const sessions = [await create()];
    while (sessions.length < options.sessions) {
      const batch = Math.min(10, options.sessions - sessions.length);
      sessions.push(...(await Promise.all(Array.from({ length: batch }, create))));
    }
    const ids = new Set(sessions.map((s) => s.sessionId));
    const outcomes = {
      /** This test's turn outcomes so far, in the order they were printed. */
      get list() {
        return printed.filter((outcome) => ids.has(outcome.sessionId));
      },
    };
    const send = (api: Child, sessionIds: readonly string[]) => {
      const request: SendRequest = {
        tenantId: tenant.tenantId,
        userId: tenant.owner.id,
        email: tenant.owner.email,
        sessionIds: [...sessionIds],
      };
      api.process.stdin.write(`send ${JSON.stringify(request)}\n`);
    };
    /** The provisions the workers started of this test's workspaces. */
    const provisionStarts = async () => {
      const workspaceIds = new Set(sessions.map((s) => s.workspaceId));
      return (await readProvisionLog(controlDir)).filter(
        (line) => line.startsWith("start") && workspaceIds.has(line.split(" ")[2]!),
      );
    };
    return { tenant, agent, sessions, apis, outcomes, send, quota, enqueue, provisionStarts };
  }

  it("concurrent turns: 40 at once from two replicas → exactly the limit runs; the ledger matches the hand count", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const respond = async (request: RecordedRequest): Promise<FakeTurn | undefined> => {
      const last = request.messages.at(-1);
      if (last?.role === "tool")
        return { kind: "text", text: "Done.", usage: { promptTokens: 200, completionTokens: 20 } };
      if (last?.role !== "user" || !/^turn for /.test(textOf(last.content))) return undefined;
      await released; // every admitted turn is held here until the refusals are all in
      return {
        kind: "tool-calls",
        calls: [{ name: "Bash", arguments: { command: "echo metered" } }],
        usage: { promptTokens: 100, completionTokens: 10 },
      };
    };
    const run = await setUp({ isolationPolicy: "PER_AGENT", sessions: SESSIONS, respond });
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: run.tenant.scope.tenantId, overrides: { concurrentTurns: 5 } },
      run.quota,
      processBerth().db,
    );

    const ids = run.sessions.map((s) => s.sessionId);
    run.send(run.apis[0]!, ids.slice(0, SESSIONS / 2));
    run.send(run.apis[1]!, ids.slice(SESSIONS / 2));
    // 35 refusals while 5 turns are held inside the model: never a sixth.
    await until("35 refusals and 5 held turns", () =>
      run.outcomes.list.length === SESSIONS - 5 && fake!.requests.length === 5 ? true : undefined,
    );
    const usageWhileHeld = await readTenantUsage(run.tenant.scope, run.quota, processBerth().db);
    expect(usageWhileHeld.limits.find((l) => l.limit === "concurrentTurns")).toMatchObject({
      value: 5,
      used: 5,
    });
    release();
    await until("every turn's outcome", () => (run.outcomes.list.length === SESSIONS ? true : undefined));
    expect(fake!.requests.length).toBe(10); // 5 turns × (tool call + answer), nothing else ever got in

    const refused = run.outcomes.list.filter((o) => o.refused);
    const completed = run.outcomes.list.filter((o) => o.status === "completed");
    expect(completed).toHaveLength(5);
    expect(refused).toHaveLength(SESSIONS - 5);
    expect(new Set(refused.map((o) => `${o.refused!.code} ${JSON.stringify(o.refused!.details)}`))).toEqual(
      new Set([`QUOTA_EXCEEDED ${JSON.stringify({ limit: "concurrentTurns", value: 5, used: 5 })}`]),
    );
    expect(refused[0]!.refused!.message).toBe("The tenant's concurrent turns quota (5) is reached.");

    // Metering: stop the workspace (ends its READY period), then the ledger holds exactly what ran.
    const workspaceId = run.sessions[0]!.workspaceId;
    await run.enqueue("workspace.stop", { tenantId: run.tenant.tenantId, workspaceId, reason: "test" });
    await until("the workspace stopped", async () => {
      const row = await getDb().workspace.findUnique({ where: { id: workspaceId }, select: { state: true } });
      return row?.state === "STOPPED" ? true : undefined;
    });
    const [provisioned] = await listWorkspaceEvents(
      run.tenant.scope,
      workspaceId,
      {
        kinds: ["provisioned"],
      },
      processBerth().db,
    );
    const [stopping] = await listWorkspaceEvents(
      run.tenant.scope,
      workspaceId,
      { kinds: ["stopping"] },
      processBerth().db,
    );
    const readySeconds = (stopping!.at.getTime() - provisioned!.at.getTime()) / 1000;
    const sums = await until("the ledger to hold the run", async () => {
      const rows = await sumUsageSince(run.tenant.tenantId, new Date(0), undefined, processBerth().db);
      const total = (kind: string) => rows.filter((r) => r.kind === kind).reduce((n, r) => n + r.quantity, 0);
      return total("turn") === 5 && total("workspace_seconds") > 0 ? { rows, total } : undefined;
    });
    expect({
      turns: sums.total("turn"),
      toolCalls: sums.total("tool_call"),
      inputTokens: sums.total("input_tokens"),
      outputTokens: sums.total("output_tokens"),
      provisions: sums.total("provision"),
    }).toEqual({ turns: 5, toolCalls: 5, inputTokens: 5 * 300, outputTokens: 5 * 30, provisions: 1 });
    expect(Math.abs(sums.total("workspace_seconds") - readySeconds)).toBeLessThan(1);
    expect(new Set(sums.rows.map((r) => r.backend))).toEqual(new Set(["local"]));
    // Attribution: each turn record names its session, agent and user.
    const turnRows = await getDb().usageRecord.findMany({
      where: { tenantId: run.tenant.tenantId, kind: "turn" },
    });
    expect(new Set(turnRows.map((r) => r.sessionId))).toEqual(new Set(completed.map((o) => o.sessionId)));
    expect(new Set(turnRows.map((r) => `${r.agentId} ${r.userId} ${r.workspaceId}`))).toEqual(
      new Set([`${run.agent.id} ${run.tenant.owner.id} ${workspaceId}`]),
    );
  });

  it("live workspaces: 40 first turns of 40 workspaces at once → exactly the limit is ever provisioned", async () => {
    const respond = (request: RecordedRequest): FakeTurn | undefined =>
      request.messages.at(-1)?.role === "user" ? { kind: "text", text: "Hello." } : undefined;
    const run = await setUp({ isolationPolicy: "PER_SESSION", sessions: SESSIONS, respond });
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: run.tenant.scope.tenantId, overrides: { liveWorkspaces: 3, concurrentTurns: 1_000 } },
      run.quota,
      processBerth().db,
    );
    expect(new Set(run.sessions.map((s) => s.workspaceId)).size).toBe(SESSIONS);

    const ids = run.sessions.map((s) => s.sessionId);
    run.send(run.apis[0]!, ids.slice(0, SESSIONS / 2));
    run.send(run.apis[1]!, ids.slice(SESSIONS / 2));
    await until(
      "every turn's outcome",
      () => (run.outcomes.list.length === SESSIONS ? true : undefined),
      180_000,
    );

    const completed = run.outcomes.list.filter((o) => o.status === "completed");
    const refused = run.outcomes.list.filter((o) => o.errors.some((e) => e.startsWith("QUOTA_EXCEEDED")));
    expect(completed).toHaveLength(3);
    expect(refused).toHaveLength(SESSIONS - 3);
    expect(new Set(refused.flatMap((o) => o.errors))).toEqual(
      new Set(["QUOTA_EXCEEDED: The tenant's live workspaces quota (3) is reached."]),
    );
    // Never one machine over the limit: the workers started exactly 3 provisions, and 3 records are live.
    expect(await run.provisionStarts()).toHaveLength(3);
    const live = await getDb().workspace.count({
      where: { tenantId: run.tenant.tenantId, state: { in: ["PROVISIONING", "READY", "STOPPING"] } },
    });
    expect(live).toBe(3);
  });

  it("budget: one turn's worth with the hard stop → the next turn is refused with the typed error", async () => {
    const respond = (request: RecordedRequest): FakeTurn | undefined =>
      request.messages.at(-1)?.role === "user" ? { kind: "text", text: "Hello." } : undefined;
    const run = await setUp({ isolationPolicy: "PER_AGENT", sessions: 2, respond });
    await changeBudget(
      run.tenant.scope,
      { monthlyBudgetUnits: 1, alertPercents: [50, 100], hardStop: true, stopWorkspaces: true },
      run.quota,
      processBerth().audit,
      processBerth().db,
    );
    const [first, second] = run.sessions.map((s) => s.sessionId);
    run.send(run.apis[0]!, [first!]);
    await until("the first turn", () => (run.outcomes.list.length === 1 ? true : undefined));
    expect(run.outcomes.list[0]).toMatchObject({ status: "completed", refused: null, errors: [] });
    // The flush (workers) writes the turn and raises both alerts, once each.
    const alerts = await until("the budget alerts", async () => {
      const rows = await getDb().budgetAlert.findMany({ where: { tenantId: run.tenant.tenantId } });
      return rows.length === 2 ? rows : undefined;
    });
    expect(alerts.map((a) => [a.percent, a.spentUnits, a.budgetUnits]).sort()).toEqual([
      [100, 1, 1],
      [50, 1, 1],
    ]);
    // `stopWorkspaces`: the tenant's running workspace is stopped, saying why.
    const workspaceId = run.sessions[0]!.workspaceId;
    await until("the budget stop of the workspace", async () => {
      const row = await getDb().workspace.findUnique({ where: { id: workspaceId }, select: { state: true } });
      return row?.state === "STOPPED" ? true : undefined;
    });
    const [stopping] = await listWorkspaceEvents(
      run.tenant.scope,
      workspaceId,
      { kinds: ["stopping"] },
      processBerth().db,
    );
    expect(stopping?.reason).toBe("monthly budget (1 units) exceeded");

    run.send(run.apis[1]!, [second!]);
    await until("the second turn", () => (run.outcomes.list.length === 2 ? true : undefined));
    expect(run.outcomes.list[1]).toMatchObject({
      sessionId: second,
      status: null,
      refused: {
        code: "QUOTA_EXCEEDED",
        message: "The tenant's monthly budget (1 units) is used up (1 spent).",
        details: { limit: "monthlyBudgetUnits", value: 1, used: 1 },
      },
    });
    expect(fake!.requests).toHaveLength(1); // the refused turn never reached the model
    const thresholds = await until("the threshold events", async () => {
      const rows = await getDb().auditLog.findMany({
        where: { tenantId: run.tenant.tenantId, action: "budget.threshold" },
      });
      return rows.length === 2 ? rows : undefined;
    });
    expect(thresholds.map((row) => (row.details as { percent: number }).percent).sort()).toEqual([100, 50]);
  });
});
