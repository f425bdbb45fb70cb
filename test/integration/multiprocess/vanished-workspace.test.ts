/**
 * Issue 11 ("Files and disks"): a workspace whose folder vanished behind Berth's back. A web replica and a
 * worker (separate processes, real Postgres and Redis, the default bubblewrap backend): the replica used
 * the workspace, then its folder is deleted on the host. Before, the replica answered "path . resolves
 * outside the workspace" (403) and stayed READY until the hourly reconcile. Now the next use says what
 * happened (CONFLICT, workspace_vanished), the one after re-provisions through the worker, which records
 * a `data_lost` event, and the workspace works again (empty).
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  getWorkspace,
  listWorkspaceEvents,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import { closeSharedQueues } from "@/server/queue/queues";
import { safePathSegment } from "@/server/workspace/backends/local/local-provider";
import { createTestTenant } from "../db/fixtures";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import type { ReplicaAnswer } from "./replica-process";

type Listing = { entries: Array<{ name: string }> } | Array<{ name: string }>;

describe("a workspace whose folder vanished", { timeout: 120_000 }, () => {
  let children: Child[] = [];
  let basedir: string | undefined;

  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
    await closeSharedQueues();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  it("is detected on use, said plainly, re-provisioned by the worker with a data_lost event", async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-vanish-")));
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    const tenant = await createTestTenant();
    const workspaceId = `mp-vanish-${randomBytes(4).toString("hex")}`;
    await upsertWorkspaceBinding(tenant.scope, {
      id: workspaceId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
    });
    const workspaces = path.join(basedir, "workspaces");
    const env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mpvan-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: workspaces,
      MP_CONTROL_DIR: controlDir,
      MP_USER_ID: tenant.owner.id,
      MP_USER_EMAIL: tenant.owner.email,
      LOG_LEVEL: "silent",
    };
    const worker = startChild("worker-process.ts", env);
    const replica = startChild("replica-process.ts", env);
    children.push(worker, replica);
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));

    let nextId = 0;
    const call = async (procedure: string, input: Record<string, unknown>) => {
      const id = ++nextId;
      replica.process.stdin.write(`${JSON.stringify({ id, path: procedure, input })}\n`);
      return JSON.parse(await replica.nextLine((l) => l.startsWith(`{"id":${id},`))) as ReplicaAnswer;
    };
    const target = { tenantId: tenant.tenantId, workspaceId };
    const names = (answer: ReplicaAnswer) => {
      if (!answer.ok) throw new Error(`${answer.error.code} ${answer.error.message}`);
      const listing = answer.result as Listing;
      return (Array.isArray(listing) ? listing : listing.entries).map((entry) => entry.name);
    };

    expect((await call("workspace.files.write", { ...target, path: "notes.txt", content: "kept?" })).ok).toBe(
      true,
    );
    expect(names(await call("workspace.files.list", target))).toContain("notes.txt");
    expect((await getWorkspace(tenant.scope, workspaceId))?.state).toBe("READY");

    // Deleted outside Berth (an operator, a disk swapped, a cleanup script).
    // A binding without a user: the host-folder layout's user segment is the empty id's.
    const folder = path.join(workspaces, safePathSegment(tenant.tenantId), safePathSegment(""), workspaceId);
    await fs.rm(folder, { recursive: true });

    // The use that finds it gone says so (not "resolves outside the workspace", not a 403).
    const noticed = await call("workspace.files.list", target);
    expect(noticed).toMatchObject({ ok: false, error: { code: "CONFLICT" } });
    expect(!noticed.ok && noticed.error.message).toMatch(/files are gone/);

    // The next use re-provisions through the worker: a fresh, empty folder, and the ledger says why.
    expect(names(await call("workspace.files.list", target))).not.toContain("notes.txt");
    expect((await getWorkspace(tenant.scope, workspaceId))?.state).toBe("READY");
    const events = await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["data_lost"] });
    expect(events).toHaveLength(1);
    expect(events[0]!.reason).toMatch(/files are lost/);
    const provisions = (await readProvisionLog(controlDir)).filter((line) => line.startsWith("done"));
    expect(provisions).toHaveLength(2);
    expect(await fs.stat(folder).then((info) => info.isDirectory())).toBe(true);
  });
});
