/**
 * Issue 26 across real processes: two API processes (chat-http-process.ts, the composition a Next server
 * builds, behind HTTP) and two worker processes (worker-process.ts, Berth's worker runtime over the
 * configured drivers), the `local` driver (bubblewrap), real PostgreSQL and Redis. The workers' refill fills
 * a pool of POOL machines; then FIRST_USES first uses of four tenants, half through each API process, all at
 * once. Each served first use gets a pool machine of its own (its folder is that machine's, by inode), none
 * is taken twice or lost, the rest are created at once (`pool_miss`), no claim is left behind, and no
 * folder holds another workspace's files.
 *
 * What is asserted is outcomes only: which process claims and binds (the worker's provision job or the API's
 * gate) is left open, and so is any timing.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { processApiRuntime } from "@/server/api/composition";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { createBerthClient, type BerthClient } from "@/server/client";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";
import { loadRedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { createAgent } from "@/server/modules/agent/agent.data";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { createSession } from "@/server/modules/session/session.data";
import { newWarmMachineId } from "@/server/modules/pool/warm-pool.service";
import { jobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection, redisKey } from "@/server/redis";
import { assignWorkspaceId, IsolationPolicy } from "@/server/workspace/manager/isolation";
import { hostFolderDriver } from "../../drivers/local/support/sandbox-env";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "../multiprocess/processes";

const POOL = 120;
const FIRST_USES = 200;
const TENANTS = 4;
const POLL = { timeout: 60_000, interval: 100 };

/** One first use: the tenant (index), its workspace, and the API process (0 or 1) it is sent to. */
type FirstUse = { tenant: number; workspaceId: string; api: number };

/** Every file under `dir` (path relative to it) with its text. */
async function filesUnder(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, file), await fs.readFile(file, "utf8"));
  }
  return files;
}

/** The stage-timing paths of each workspace's provision, buffered in Redis or already flushed to Postgres. */
async function provisionPaths(
  redis: Redis,
  prefix: string,
  workspaceIds: readonly string[],
): Promise<Map<string, Set<string>>> {
  const wanted = new Set(workspaceIds);
  const buffered = (await redis.lrange(redisKey(prefix, "metrics", "stages"), 0, -1)).map(
    (line) => JSON.parse(line) as { kind: string; path: string; workspaceId: string | null },
  );
  const flushed = await getDb().stageSample.findMany({
    where: { kind: "provision", workspaceId: { in: [...wanted] } },
    select: { kind: true, path: true, workspaceId: true },
  });
  const paths = new Map<string, Set<string>>();
  for (const sample of [...buffered, ...flushed]) {
    if (sample.kind !== "provision" || !sample.workspaceId || !wanted.has(sample.workspaceId)) continue;
    const known = paths.get(sample.workspaceId) ?? new Set<string>();
    paths.set(sample.workspaceId, known.add(sample.path));
  }
  return paths;
}

/** A tenant (its owner's scope for what this process makes) and an admin API key for the first uses. */
type Tenant = TestTenant & { apiKey: string };

async function tenantWithKey(): Promise<Tenant> {
  const { auth } = processApiRuntime();
  const tenant = await createTestTenant(auth);
  const { db, config } = processBerth();
  const key = { name: "first uses", role: "admin" as const };
  const { plainKey } = await createApiKey(auth, tenant.scope, key, apiKeySecret(config), db);
  return { ...tenant, apiKey: plainKey };
}

/**
 * `count` sessions of one PER_SESSION agent of the tenant's owner, each with its workspace's record (PENDING,
 * on `local`) written in the session's transaction, as session.create leaves them: made by this process
 * while the children boot, so that only the first uses go through the API processes.
 */
async function pendingWorkspaces(tenant: Tenant, count: number): Promise<string[]> {
  const { db, config } = processBerth();
  const { scope } = tenant;
  const agent = await createAgent(
    scope,
    {
      name: `pool-${randomBytes(3).toString("hex")}`,
      modelConfig: { provider: "openai", model: "none" },
      isolationPolicy: "PER_SESSION",
    },
    secretKeyFromBytes(config.secrets.encryptionKey),
    db,
  );
  // One after another: each takes the tenant's quota lock in its transaction (a new record counts against
  // `totalWorkspaces`), so side by side they would only hold this process' connections waiting for it.
  const workspaceIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const workspaceId = assignWorkspaceId(IsolationPolicy.PER_SESSION, {
      tenantId: scope.tenantId,
      userId: tenant.owner.id,
      agentId: agent.id,
    });
    const workspace = {
      id: workspaceId,
      backendKind: "local" as const,
      isolationPolicy: "PER_SESSION" as const,
      agentId: agent.id,
      userId: tenant.owner.id,
    };
    await createSession(scope, { agentId: agent.id, workspaceId }, db, {
      binding: { workspace, quota: { config: config.quotas } },
    });
    workspaceIds.push(workspaceId);
  }
  return workspaceIds;
}

describe(
  "warm pool: one machine per first use across two API and two worker processes",
  { timeout: 180_000 },
  () => {
    const children: Child[] = [];
    const prefix = `${process.env.BERTH_REDIS_PREFIX}-pool-${randomBytes(3).toString("hex")}`;
    let basedir: string;
    let workspacesDir: string;
    let clients: BerthClient[][];
    let tenants: Tenant[];
    let uses: FirstUse[];
    let failed = false;
    // This process' view of the children's Redis (their prefix): the queues and the stage-timing buffer.
    const redisConfig = { ...loadRedisConfig(), prefix };
    let connection: Redis;
    let queues: QueueSet<typeof jobCatalog>;

    const clearPoolRows = async () => {
      await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
      await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
    };

    beforeAll(async () => {
      await clearPoolRows();
      connection = createRedisConnection(redisConfig, "producer", "warm-pool-processes-test");
      queues = createQueues(jobCatalog, {
        connection,
        redis: redisConfig,
        log: createLogger({ level: "silent" }),
      });
      basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-pool-processes-")));
      await fs.chmod(basedir, 0o711); // the sandboxed workspaces' uids pass through to their folders
      workspacesDir = path.join(basedir, "workspaces");
      const env = {
        BERTH_REDIS_PREFIX: prefix,
        BERTH_WORKSPACE_BACKEND: "local",
        BERTH_WORKSPACE_BASEDIR: workspacesDir,
        // min = max: a refill aims at exactly POOL whatever the demand.
        BERTH_WARM_POOLS: `local:${POOL}-${POOL}`,
        // Quotas are not under test: room for every first use of a tenant at once.
        BERTH_QUOTA_LIVE_WORKSPACES: "1000",
        BERTH_QUOTA_PROVISIONS_PER_MINUTE: "1000",
        WORKERS_CONCURRENCY: "8",
        MP_CONTROL_DIR: await makeControlDir(basedir),
        LOG_LEVEL: "warn",
      };
      // worker-process.ts runs no schedules: no refill tick, and none of the installation-wide ticks
      // (reconcile, sweep) that would act on other tests' records in this database. The pool is filled by
      // the refill asked for below, and later only by the ones claims ask for.
      const workers = [startChild("worker-process.ts", env), startChild("worker-process.ts", env)];
      const apis = [startChild("chat-http-process.ts", env), startChild("chat-http-process.ts", env)];
      children.push(...workers, ...apis);
      // Meanwhile, the tenants (each with an API key) and their workspaces.
      const [, urls] = await Promise.all([
        Promise.all(workers.map((worker) => worker.nextLine((line) => line === "ready"))).then(() =>
          createEnqueue(queues)("pool.refill", { trigger: "manual" }),
        ),
        Promise.all(apis.map(async (api) => (await api.nextLine((l) => l.startsWith("ready "))).slice(6))),
        Promise.all(
          Array.from({ length: TENANTS }, async () => {
            const tenant = await tenantWithKey();
            return { tenant, workspaceIds: await pendingWorkspaces(tenant, FIRST_USES / TENANTS) };
          }),
        ).then((made) => {
          tenants = made.map(({ tenant }) => tenant);
          // Half of each tenant's first uses go to each API process.
          uses = made.flatMap(({ workspaceIds }, tenant) =>
            workspaceIds.map((workspaceId, i) => ({ tenant, workspaceId, api: i % 2 })),
          );
        }),
      ]);
      clients = tenants.map((tenant) => urls.map((url) => createBerthClient({ url, apiKey: tenant.apiKey })));
      // The pool is full: POOL idle machines and, min being max, no refill making more.
      await vi.waitFor(async () => {
        const idle = await getDb().warmMachine.count({ where: { backendKind: "local", state: "IDLE" } });
        expect(idle).toBe(POOL);
      }, POLL);
    });

    afterEach((context) => {
      failed ||= context.task.result?.state === "fail";
    });

    afterAll(async () => {
      await stopChildren(children, failed);
      await queues?.close();
      await connection?.quit();
      await clearPoolRows();
      await closeProcessBerth();
      if (basedir) await fs.rm(basedir, { recursive: true, force: true });
    });

    it(`${FIRST_USES} first uses at once: ${POOL} machines bound once each, the rest created at once`, async () => {
      const workspaceIds = uses.map((use) => use.workspaceId);
      expect(new Set(workspaceIds).size).toBe(FIRST_USES);

      // The pool as the burst meets it: each machine's folder inode (a bind renames the folder, so the bound
      // workspace's folder keeps it) and its key.
      const pooled = await getDb().warmMachine.findMany({ where: { backendKind: "local", state: "IDLE" } });
      expect(pooled).toHaveLength(POOL);
      const poolDir = path.join(workspacesDir, ".pool", "local");
      const inodeOf = new Map(
        await Promise.all(
          pooled.map(async (row) => [row.id, (await fs.stat(path.join(poolDir, row.id))).ino] as const),
        ),
      );
      // Each claim asks for a refill, which would top the pool up during the burst and make the number served
      // depend on timing. A refill makes only what the IDLE and CREATING rows leave below its target (counted
      // under its lock), so POOL rows CREATING, as a refill elsewhere busy making the pool's machines would
      // hold, leave it nothing to make: exactly the POOL idle machines meet the burst. No claim takes them
      // (claims take IDLE rows only), and no refill discards them (a CREATING row is stale after 30 minutes).
      const held = Array.from({ length: POOL }, () => newWarmMachineId());
      await getDb().warmMachine.createMany({
        data: held.map((id) => ({
          id,
          backendKind: "local",
          poolKey: pooled[0]!.poolKey,
          state: "CREATING" as const,
        })),
      });

      // The burst: every first use at once, half through each API process (a file written, as a user would).
      const written = await Promise.allSettled(
        uses.map((use) =>
          clients[use.tenant]![use.api]!.workspace.files.write.mutate({
            workspaceId: use.workspaceId,
            path: "mark.txt",
            content: `mark of ${use.workspaceId}`,
          }),
        ),
      );
      const refused = written.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
      expect(refused.slice(0, 3)).toEqual([]);

      // Every first use READY; the pool's machines each bound to one workspace, named by its event.
      const records = await getDb().workspace.findMany({
        where: { id: { in: workspaceIds } },
        select: { id: true, state: true },
      });
      expect(records.map((r) => r.state)).toEqual(workspaceIds.map(() => "READY"));
      const bound = await getDb().workspaceEvent.findMany({
        where: {
          workspaceId: { in: workspaceIds },
          kind: "provisioning",
          reason: { startsWith: "pool.bound" },
        },
        select: { workspaceId: true, reason: true },
      });
      const machineOf = new Map<string, string>();
      for (const event of bound) {
        expect(machineOf.has(event.workspaceId), `${event.workspaceId} bound twice`).toBe(false);
        machineOf.set(event.workspaceId, event.reason!.slice("pool.bound: ".length));
      }
      const machines = [...machineOf.values()];
      expect(new Set(machines).size).toBe(machines.length);
      expect(machines.length).toBe(Math.min(POOL, FIRST_USES));
      expect(new Set(machines)).toEqual(new Set(inodeOf.keys()));
      // Both are written off a first use's path (the use's count, the bound machine's row): polled.
      await vi.waitFor(async () => {
        // Counted once each by the pool's demand figures: hits as many as served, misses the rest.
        const counted = await getDb().warmPoolUse.groupBy({
          by: ["hit"],
          where: { backendKind: "local" },
          _count: { _all: true },
        });
        const countOf = (hit: boolean) => counted.find((row) => row.hit === hit)?._count._all ?? 0;
        expect({ hits: countOf(true), misses: countOf(false) }).toEqual({
          hits: machines.length,
          misses: FIRST_USES - machines.length,
        });
        // No claim left behind and nothing idle: the only rows are the test's CREATING ones.
        const left = await getDb().warmMachine.findMany({
          where: { backendKind: "local" },
          select: { id: true },
        });
        expect(new Set(left.map((row) => row.id))).toEqual(new Set(held));
      }, POLL);

      // Each provision's path: `warm` where a machine was bound, `pool_miss` (created at once) elsewhere.
      const expectedPaths = new Map(workspaceIds.map((id) => [id, machineOf.has(id) ? "warm" : "pool_miss"]));
      await vi.waitFor(async () => {
        const paths = await provisionPaths(connection, redisConfig.prefix, workspaceIds);
        for (const id of workspaceIds)
          expect([...(paths.get(id) ?? [])], id).toEqual([expectedPaths.get(id)]);
      }, POLL);

      // One folder per workspace, none shared, none left in the pool; a bound workspace's folder is its
      // machine's, a created one's no pool machine's; each holds its own mark and nothing of another's.
      const driver = hostFolderDriver(workspacesDir);
      expect(await driver.listIdleMachines!()).toEqual([]);
      const resources = await driver.listResources();
      expect(resources.map((r) => r.workspaceId).sort()).toEqual([...workspaceIds].sort());
      expect(new Set(resources.map((r) => r.locator)).size).toBe(FIRST_USES);
      const poolInodes = new Set(inodeOf.values());
      for (const { workspaceId, locator } of resources) {
        if (!workspaceId) throw new Error(`a folder named by no workspace: ${locator}`);
        const inode = (await fs.stat(locator)).ino;
        const machine = machineOf.get(workspaceId);
        if (machine) expect(inode, workspaceId).toBe(inodeOf.get(machine));
        else expect(poolInodes.has(inode), workspaceId).toBe(false);
        const files = await filesUnder(locator);
        expect(files.get("mark.txt")).toBe(`mark of ${workspaceId}`);
        const text = [...files].flat().join("\n");
        const others = workspaceIds.filter((other) => other !== workspaceId && text.includes(other));
        expect(others, locator).toEqual([]);
      }
    });
  },
);
