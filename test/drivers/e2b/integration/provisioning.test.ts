/**
 * Issue 13, across real processes: E2B workspaces provisioned from separate Node processes against one
 * loopback E2B emulator (the unmodified SDK in each).
 *   - Two driver processes provisioning the same workspaces at the same moment both create a sandbox, then
 *     converge on one per workspace (the younger is killed), and both answer its handle.
 *   - Every such process SIGKILLed, a fresh one reattaches by the stored handle to the same sandbox, files
 *     intact.
 *   - Two API processes and two workers (Berth's own, Postgres and Redis): 100 concurrent first uses of one
 *     E2B workspace → one workspace, one sandbox.
 *   - A tenant admin stores the tenant's own E2B key (sealed in the database): the workers provision and the
 *     API process attaches the tenant's workspace in that team, not the installation's.
 * The last two share one stack of workers and API processes (each start costs seconds of CPU).
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { createBackendSettingsService } from "@/server/modules/backend-settings/backend-settings.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import type { E2bEmulator } from "../../../fixtures/e2b-emulator/e2b-emulator";
import { describeE2b, withEmulator } from "../support/e2b-env";
import { createTestTenant, type TestTenant } from "../../../integration/db/fixtures";
import { freshSession } from "../../../integration/workspace/harness";
import {
  makeControlDir,
  resolveThrough,
  startChild,
  stopChildren,
  type Child,
} from "../../../integration/multiprocess/processes";
import { processBerth } from "@/server/composition/process-berth";

type Answer =
  | { ok: true; handle?: { sandboxId: string } & Record<string, unknown>; exitCode?: number; stdout?: string }
  | { ok: false; error: string };

const TENANT_TEAM_KEY = `e2b_${randomBytes(20).toString("hex")}`;

describeE2b("E2B workspaces across processes", { timeout: 300_000 }, () => {
  let emulator: E2bEmulator;
  let basedir: string;
  let env: Record<string, string>;
  let children: Child[] = [];
  const installation = `mp-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    emulator = await withEmulator({ teamKeys: [TENANT_TEAM_KEY] });
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-e2b-")));
    env = {
      E2B_API_KEY: emulator.apiKey,
      E2B_DOMAIN: emulator.domain,
      BERTH_E2B_API_URL: emulator.url,
      BERTH_E2B_SANDBOX_URL: emulator.url,
      BERTH_E2B_INSTALLATION: installation,
      // One runtime dir, as the processes of one installation share it (gateway credentials).
      BERTH_E2B_RUNTIME_DIR: path.join(basedir, "runtime"),
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      LOG_LEVEL: "silent",
    };
  }, 120_000);
  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
  });
  afterAll(async () => {
    await emulator?.close();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  const spec = (workspaceId: string, tenantId = "tenant-mp", handle: unknown = null) => ({
    workspaceId,
    tenantId,
    userId: "user-mp",
    agentId: "agent-mp",
    isolation: "per_agent" as const,
    handle,
  });
  const live = (workspaceId: string) =>
    emulator.sandboxIds().filter((id) => emulator.sandbox(id)?.metadata["berth.workspace"] === workspaceId);

  async function driverProcess(): Promise<Child> {
    const child = startChild("e2b-driver-process.ts", env);
    children.push(child);
    await child.nextLine((line) => line === "ready");
    return child;
  }
  async function ask(child: Child, request: unknown): Promise<Answer> {
    child.process.stdin.write(`${JSON.stringify(request)}\n`);
    return JSON.parse(await child.nextLine((line) => line.startsWith("{"))) as Answer;
  }
  function handleOf(answer: Answer) {
    if (!answer.ok || !answer.handle) throw new Error(`no handle: ${JSON.stringify(answer)}`);
    return answer.handle;
  }

  it("two processes racing to provision converge on one sandbox each; a fresh process reattaches by the handle", async () => {
    const [a, b] = await Promise.all([driverProcess(), driverProcess()]);
    const workspaces = Array.from({ length: 3 }, () => `w${randomBytes(6).toString("hex")}`);
    const requests = (child: Child) =>
      workspaces.map((workspaceId) => {
        child.process.stdin.write(`${JSON.stringify({ op: "provision", spec: spec(workspaceId) })}\n`);
        return child.nextLine((line) => line.startsWith("{"));
      });
    const pendingA = requests(a);
    const pendingB = requests(b);
    for (const child of [a, b]) child.process.stdin.write("go\n");
    const answers = (await Promise.all([...pendingA, ...pendingB])).map((line) => JSON.parse(line) as Answer);
    const sandboxOf = new Map<string, string>();
    for (const answer of answers) {
      const handle = handleOf(answer);
      const workspaceId = emulator.sandbox(handle.sandboxId)?.metadata["berth.workspace"];
      expect(workspaceId).toBeDefined();
      if (sandboxOf.has(workspaceId!)) expect(handle.sandboxId).toBe(sandboxOf.get(workspaceId!));
      sandboxOf.set(workspaceId!, handle.sandboxId);
    }
    expect([...sandboxOf.keys()].sort()).toEqual([...workspaces].sort());
    for (const workspaceId of workspaces) expect(live(workspaceId)).toEqual([sandboxOf.get(workspaceId)]);
    // Both processes did create (they listed before either create finished): the race really happened.
    const created = emulator
      .created()
      .filter((entry) => workspaces.includes(entry.metadata["berth.workspace"]!));
    expect(created.length).toBeGreaterThan(workspaces.length);

    // A file written through one process; then every process dies; a fresh one reattaches by the handle.
    const [first] = workspaces;
    // Answers arrive in completion order: take the handle of `first`'s sandbox.
    const handle = answers.map(handleOf).find((each) => each.sandboxId === sandboxOf.get(first!))!;
    const stored = spec(first!, "tenant-mp", handle);
    const wrote = await ask(a, { op: "exec", spec: stored, argv: ["sh", "-c", "printf kept > proof.txt"] });
    expect(wrote).toMatchObject({ ok: true, exitCode: 0 });
    await stopChildren(children.splice(0), false);

    const c = await driverProcess();
    c.process.stdin.write("go\n");
    const again = handleOf(await ask(c, { op: "provision", spec: stored }));
    expect(again).toMatchObject({ sandboxId: handle.sandboxId, replaced: null, missing: [] });
    const read = await ask(c, {
      op: "exec",
      spec: spec(first!, "tenant-mp", again),
      argv: ["cat", "proof.txt"],
    });
    expect(read).toMatchObject({ ok: true, exitCode: 0, stdout: Buffer.from("kept").toString("base64") });
    expect(live(first!)).toEqual([handle.sandboxId]);
  });

  /** Two workers and two API processes of one installation on the e2b backend (Postgres, Redis). */
  let stack: Promise<Child[]> | undefined;
  let stackChildren: Child[] = [];
  let stackFailed = false;
  afterEach((context) => {
    stackFailed ||= context.task.result?.state === "fail";
  });
  afterAll(async () => {
    await stopChildren(stackChildren, stackFailed);
  });
  /** The stack's API processes (started by the first test that asks). */
  function stackApis(): Promise<Child[]> {
    stack ??= (async () => {
      const controlDir = await makeControlDir(await fs.mkdtemp(path.join(basedir, "stack-")));
      const stackEnv = {
        ...env,
        BERTH_WORKSPACE_BACKEND: "e2b",
        BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mp-${randomBytes(3).toString("hex")}`,
        MP_CONTROL_DIR: controlDir,
        WORKERS_CONCURRENCY: "4",
      };
      const workers = Array.from({ length: 2 }, () => startChild("worker-process.ts", stackEnv));
      const apis = Array.from({ length: 2 }, () => startChild("api-process.ts", stackEnv));
      stackChildren = [...workers, ...apis];
      await Promise.all(stackChildren.map((child) => child.nextLine((line) => line === "ready")));
      return apis;
    })();
    return stack;
  }
  /** `calls` concurrent first uses of the session's workspace from each of the first `apis` API processes. */
  async function resolveFrom(apis: number, tenant: TestTenant, sessionId: string, calls: number) {
    const started = (await stackApis()).slice(0, apis);
    return Promise.all(
      started.map((api) =>
        resolveThrough(api, {
          tenantId: tenant.tenantId,
          userId: tenant.owner.id,
          sessionIds: [sessionId],
          calls,
        }),
      ),
    );
  }

  it("two API processes and two workers: 100 concurrent first uses of one E2B workspace → one sandbox", async () => {
    const tenant: TestTenant = await createTestTenant();
    const { session, workspaceId } = await freshSession(tenant.scope, "PER_AGENT", { backend: "e2b" });
    const results = await resolveFrom(2, tenant, session.id, 50);
    for (const result of results) expect(result).toEqual({ ok: 50, workspaceIds: [workspaceId], errors: [] });

    const record = await getWorkspace(tenant.scope, workspaceId, processBerth().db);
    expect(record).toMatchObject({ state: "READY", backendKind: "e2b" });
    const sandboxes = live(workspaceId);
    expect(sandboxes).toHaveLength(1);
    expect((record.backendHandle as { sandboxId?: string } | null)?.sandboxId).toBe(sandboxes[0]);
    expect(emulator.sandbox(sandboxes[0]!)?.team).toBe(emulator.apiKey);
  });

  it("a tenant's own E2B key, stored sealed by its admin, is the team its workspaces are made in", async () => {
    const tenant: TestTenant = await createTestTenant();
    const settings = createBackendSettingsService({
      audit: processBerth().audit,
      db: processBerth().db,
      secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
    });
    await settings.set(tenant.scope, { backend: "e2b", settings: { apiKey: TENANT_TEAM_KEY } });
    const { session, workspaceId } = await freshSession(tenant.scope, "PER_AGENT", { backend: "e2b" });
    const results = await resolveFrom(1, tenant, session.id, 10);
    expect(results).toEqual([{ ok: 10, workspaceIds: [workspaceId], errors: [] }]);
    const sandboxes = live(workspaceId);
    expect(sandboxes).toHaveLength(1);
    expect(emulator.sandbox(sandboxes[0]!)?.team).toBe(TENANT_TEAM_KEY);
  });
});
