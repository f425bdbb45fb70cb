/**
 * Two API processes and two worker processes (separate Node processes, real Postgres and Redis):
 * 200 concurrent resolves of one fresh workspace → exactly one provision; a worker SIGKILLed in the middle of
 * a provision → BullMQ's stalled-job recovery retries it on the other worker, and there is still exactly one
 * workspace and no orphan.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { hostFolderMachine } from "../../unit/workspace/support/sandbox-env";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession } from "../workspace/harness";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";

describe("multi-process provisioning", { timeout: 120_000 }, () => {
  let tenant: TestTenant;
  let children: Child[] = [];

  beforeAll(async () => {
    tenant = await createTestTenant();
  });
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
  });

  async function setup() {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-")));
    // The sandboxed backend's workspace uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    const env = {
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
    const provisions = async () => await readProvisionLog(controlDir);
    return { basedir, controlDir, env, provisions };
  }

  async function startWorkers(env: Record<string, string>, count: number): Promise<Child[]> {
    const workers = Array.from({ length: count }, () => startChild("worker-process.ts", env));
    children.push(...workers);
    await Promise.all(workers.map((w) => w.nextLine((l) => l === "ready")));
    return workers;
  }

  function startApi(env: Record<string, string>, sessionId: string, calls: number): Child {
    const api = startChild("api-process.ts", {
      ...env,
      MP_TENANT_ID: tenant.tenantId,
      MP_USER_ID: tenant.owner.id,
      MP_SESSION_ID: sessionId,
      MP_CALLS: String(calls),
    });
    children.push(api);
    return api;
  }

  it("200 concurrent resolves from two API processes, two workers → exactly one provision", async () => {
    const { env, provisions, basedir } = await setup();
    const { session, workspaceId } = await freshSession(tenant.scope);
    await startWorkers(env, 2);
    const apis = [startApi(env, session.id, 100), startApi(env, session.id, 100)];
    await Promise.all(apis.map((api) => api.nextLine((l) => l === "ready")));
    for (const api of apis) api.process.stdin.write("go\n");
    const results = await Promise.all(
      apis.map(async (api) => JSON.parse(await api.nextLine((l) => l.startsWith("{"))) as unknown),
    );
    for (const result of results)
      expect(result).toEqual({ ok: 100, workspaceIds: [workspaceId], errors: [] });

    expect((await provisions()).filter((line) => line.startsWith("start"))).toHaveLength(1);
    expect(await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] })).toHaveLength(1);
    expect((await getWorkspace(tenant.scope, workspaceId)).state).toBe("READY");
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("a worker SIGKILLed mid-provision: the job is retried by the other worker, one workspace, no orphan", async () => {
    const { env, controlDir, provisions, basedir } = await setup();
    await fs.writeFile(path.join(controlDir, "block"), "");
    const { session, workspaceId } = await freshSession(tenant.scope);
    const workers = await startWorkers(env, 2);
    const api = startApi(env, session.id, 50);
    await api.nextLine((l) => l === "ready");
    api.process.stdin.write("go\n");

    // The first provision is under way (and held) in one of the workers: kill exactly that one.
    await vi.waitFor(async () => expect((await provisions()).some((l) => l.startsWith("start"))).toBe(true), {
      timeout: 30_000,
    });
    const firstPid = Number((await provisions())[0]!.split(" ")[1]);
    const victim = workers.find((w) => w.process.pid === firstPid)!;
    victim.process.kill("SIGKILL");
    await victim.exited;
    await fs.writeFile(path.join(controlDir, "release"), "");

    const result = JSON.parse(await api.nextLine((l) => l.startsWith("{")));
    expect(result).toEqual({ ok: 50, workspaceIds: [workspaceId], errors: [] });
    const lines = await provisions();
    const starts = lines.filter((l) => l.startsWith("start"));
    const dones = lines.filter((l) => l.startsWith("done"));
    // The killed worker started once and never finished; the retry ran on the survivor. (Provisioning is
    // create-or-get, so even a further stalled-lock retry under load could not make a second workspace.)
    expect(starts.filter((l) => Number(l.split(" ")[1]) === firstPid)).toHaveLength(1);
    expect(starts.length).toBeGreaterThanOrEqual(2);
    expect(dones.length).toBeGreaterThanOrEqual(1);
    expect(dones.every((l) => Number(l.split(" ")[1]) !== firstPid)).toBe(true);
    expect((await getWorkspace(tenant.scope, workspaceId)).state).toBe("READY");
    const reasons = (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] })).map(
      (e) => e.reason,
    );
    expect(reasons).toContain("retrying an interrupted provision");

    // Exactly one workspace folder on disk, and it belongs to the record: nothing for reconcile to reap.
    const machine = hostFolderMachine(env.BERTH_WORKSPACE_BASEDIR);
    const resources = await machine.listResources();
    expect(resources.map((r) => [r.tenantId, r.workspaceId])).toEqual([[tenant.tenantId, workspaceId]]);
    await fs.rm(basedir, { recursive: true, force: true });
  });
});
