/**
 * Two API processes and two worker processes (separate Node processes, real Postgres and Redis):
 * 100 concurrent resolves of one fresh workspace → exactly one provision; a worker SIGKILLed in the middle of
 * a provision → BullMQ's stalled-job recovery retries it on the other worker, and there is still exactly one
 * workspace and no orphan. The tests share the processes (each start costs seconds of CPU); each has its
 * own fresh workspace, and the provision log is read per workspace.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { hostFolderDriver } from "../support/sandbox-env";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createTestTenant, type TestTenant } from "../../../integration/db/fixtures";
import { freshSession } from "../../../integration/workspace/harness";
import {
  makeControlDir,
  readProvisionLog,
  resolveThrough,
  startChild,
  stopChildren,
  type Child,
} from "../../../integration/multiprocess/processes";
import { processBerth } from "@/server/composition/process-berth";

describe("multi-process provisioning", { timeout: 120_000 }, () => {
  let tenant: TestTenant;
  let basedir: string;
  let controlDir: string;
  let env: Record<string, string>;
  let workers: Child[] = [];
  let apis: Child[] = [];
  let failed = false;
  /** The workspaces the tests provisioned: every folder on disk must be one of them. */
  const provisioned: string[] = [];

  beforeAll(async () => {
    tenant = await createTestTenant();
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-")));
    // The sandboxed backend's workspace uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    controlDir = await makeControlDir(basedir);
    env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mp-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      MP_CONTROL_DIR: controlDir,
      // Short, so the killed worker's job is recovered quickly; not so short that a busy 2-core CI machine
      // misses a lock renewal of a healthy worker.
      WORKERS_STALLED_INTERVAL_MS: "1000",
      WORKERS_LOCK_DURATION_MS: "3000",
      WORKERS_CONCURRENCY: "4",
      LOG_LEVEL: "silent",
    };
    workers = [0, 1].map(() => startChild("worker-process.ts", env));
    apis = [0, 1].map(() => startChild("api-process.ts", env));
    await Promise.all([...workers, ...apis].map((child) => child.nextLine((l) => l === "ready")));
  });
  afterEach((context) => {
    failed ||= context.task.result?.state === "fail";
  });
  afterAll(async () => {
    await stopChildren([...workers, ...apis], failed);
    await fs.rm(basedir, { recursive: true, force: true });
  });

  /** The provision log's lines of one workspace. */
  const provisionsOf = async (workspaceId: string) =>
    (await readProvisionLog(controlDir)).filter((line) => line.endsWith(` ${workspaceId}`));
  const go = (api: Child, sessionId: string, calls: number) =>
    resolveThrough(api, {
      tenantId: tenant.tenantId,
      userId: tenant.owner.id,
      sessionIds: [sessionId],
      calls,
    });

  // 50 per process: far more than a process' database pool and the workers' concurrency, so the first uses
  // race inside each process and across both, as 100 each did.
  it("100 concurrent resolves from two API processes, two workers → exactly one provision", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    provisioned.push(workspaceId);
    const results = await Promise.all(apis.map((api) => go(api, session.id, 50)));
    for (const result of results) expect(result).toEqual({ ok: 50, workspaceIds: [workspaceId], errors: [] });

    expect((await provisionsOf(workspaceId)).filter((line) => line.startsWith("start"))).toHaveLength(1);
    expect(
      await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, processBerth().db),
    ).toHaveLength(1);
    expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
  });

  // Last: it kills one of the shared workers.
  it("a worker SIGKILLed mid-provision: the job is retried by the other worker, one workspace, no orphan", async () => {
    await fs.writeFile(path.join(controlDir, "block"), "");
    const { session, workspaceId } = await freshSession(tenant.scope);
    provisioned.push(workspaceId);
    const answer = go(apis[0]!, session.id, 50);

    // The first provision is under way (and held) in one of the workers: kill exactly that one.
    await vi.waitFor(
      async () => expect((await provisionsOf(workspaceId)).some((l) => l.startsWith("start"))).toBe(true),
      { timeout: 30_000 },
    );
    const firstPid = Number((await provisionsOf(workspaceId))[0]!.split(" ")[1]);
    const victim = workers.find((w) => w.process.pid === firstPid)!;
    victim.process.kill("SIGKILL");
    await victim.exited;
    await fs.writeFile(path.join(controlDir, "release"), "");

    expect(await answer).toEqual({ ok: 50, workspaceIds: [workspaceId], errors: [] });
    const lines = await provisionsOf(workspaceId);
    const starts = lines.filter((l) => l.startsWith("start"));
    const dones = lines.filter((l) => l.startsWith("done"));
    // The killed worker started once and never finished; the retry ran on the survivor. (Provisioning is
    // create-or-get, so even a further stalled-lock retry under load could not make a second workspace.)
    expect(starts.filter((l) => Number(l.split(" ")[1]) === firstPid)).toHaveLength(1);
    expect(starts.length).toBeGreaterThanOrEqual(2);
    expect(dones.length).toBeGreaterThanOrEqual(1);
    expect(dones.every((l) => Number(l.split(" ")[1]) !== firstPid)).toBe(true);
    expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
    const reasons = (
      await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, processBerth().db)
    ).map((e) => e.reason);
    expect(reasons).toContain("retrying an interrupted provision");

    // One workspace folder per provisioned workspace on disk, each its record's: nothing for reconcile to reap.
    const machine = hostFolderDriver(env.BERTH_WORKSPACE_BASEDIR!);
    const resources = await machine.listResources();
    expect(resources.map((r) => [r.tenantId, r.workspaceId]).sort()).toEqual(
      provisioned.map((id) => [tenant.tenantId, id]).sort(),
    );
  });
});
