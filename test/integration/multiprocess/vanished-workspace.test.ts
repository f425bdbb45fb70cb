/**
 * Issue 11 ("Files and disks"): a workspace whose folder vanished behind Berth's back. A web replica and a
 * worker (separate processes, real Postgres and Redis, the default bubblewrap backend): the replica used
 * the workspace, then its folder is deleted on the host. Before, the replica answered "path . resolves
 * outside the workspace" (403) and stayed READY until the hourly reconcile. Now the next use says what
 * happened (CONFLICT, workspace_vanished), the one after re-provisions through the worker, which records
 * a `data_lost` event, and the workspace works again (empty).
 *
 * The same on the Docker backend, whose container kept running on the deleted folder: it stayed READY,
 * listings answered an empty success and writes failed. Its liveness is also polled (every 10 s), so the
 * use that finds the folder gone either says so or, past a poll, has already re-provisioned.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { afterEach, describe, expect, it } from "vitest";
import {
  getWorkspace,
  listWorkspaceEvents,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import { safePathSegment } from "@/server/workspace/drivers/host-folder/folder-layout";
import { BASE_IMAGE, describeDocker, SOCKET_PATH } from "../../drivers/docker/support/docker-env";
import { createTestTenant } from "../db/fixtures";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import type { ReplicaAnswer } from "./replica-process";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

type Listing = { entries: Array<{ name: string }> } | Array<{ name: string }>;

type Backend = {
  kind: "local" | "docker";
  /** The backend's environment for both processes (besides the base dir). */
  env: Record<string, string>;
  /** Whether the first use after the deletion may already have re-provisioned (liveness polling). */
  mayReprovisionFirst: boolean;
  workspaceId: string;
};

let children: Child[] = [];
let basedir: string | undefined;

afterEach(async (context) => {
  await stopChildren(children, context.task.result?.state === "fail");
  children = [];
  await closeProcessBerth();
  if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  basedir = undefined;
});

describe("a workspace whose folder vanished", { timeout: 120_000 }, () => {
  it("is detected on use, said plainly, re-provisioned by the worker with a data_lost event", () =>
    vanishedFolderCase({
      kind: "local",
      env: {},
      mayReprovisionFirst: false,
      workspaceId: `mp-vanish-${randomBytes(4).toString("hex")}`,
    }));
});

describeDocker("a Docker workspace whose host folder vanished", { timeout: 300_000 }, () => {
  const runtimeRoot = path.join("/tmp", `berth-rt-mpv-${randomBytes(3).toString("hex")}`);
  const docker = new Docker({ socketPath: SOCKET_PATH });
  const workspaceId = `mp-vanish-${randomBytes(4).toString("hex")}`;
  afterEach(async () => {
    const containers = await docker.listContainers({
      all: true,
      filters: { label: [`dev.berth.workspace=${workspaceId}`] },
    });
    for (const container of containers)
      await docker
        .getContainer(container.Id)
        .remove({ force: true })
        .catch(() => undefined);
    await fs.rm(runtimeRoot, { recursive: true, force: true });
  });

  it("is detected on use, never an empty success, re-provisioned on a new folder with a data_lost event", () =>
    vanishedFolderCase({
      kind: "docker",
      env: {
        BERTH_WORKSPACE_BACKEND: "docker",
        DOCKER_SOCKET: SOCKET_PATH,
        BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
        BERTH_DOCKER_RUNTIME_ROOT: runtimeRoot,
        BERTH_DOCKER_MEMORY_BYTES: String(512 * 1024 * 1024),
      },
      mayReprovisionFirst: true,
      workspaceId,
    }));
});

async function vanishedFolderCase(backend: Backend): Promise<void> {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-vanish-")));
  await fs.chmod(basedir, 0o711);
  const controlDir = await makeControlDir(basedir);
  const tenant = await createTestTenant();
  const { workspaceId } = backend;
  await upsertWorkspaceBinding(
    tenant.scope,
    {
      id: workspaceId,
      backendKind: backend.kind,
      isolationPolicy: "PER_AGENT",
    },
    { config: processBerth().config.quotas },
    processBerth().db,
  );
  const workspaces = path.join(basedir, "workspaces");
  const env = {
    BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mpvan-${randomBytes(3).toString("hex")}`,
    BERTH_WORKSPACE_BASEDIR: workspaces,
    MP_CONTROL_DIR: controlDir,
    MP_USER_ID: tenant.owner.id,
    MP_USER_EMAIL: tenant.owner.email,
    LOG_LEVEL: "silent",
    ...backend.env,
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
  expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db))?.state).toBe("READY");

  // Deleted outside Berth (an operator, a disk swapped, a cleanup script).
  // A binding without a user: the host-folder layout's user segment is the empty id's.
  const folder = path.join(workspaces, safePathSegment(tenant.tenantId), safePathSegment(""), workspaceId);
  await fs.rm(folder, { recursive: true });

  // The use that finds it gone says so (not "resolves outside the workspace", not a 403, not an empty
  // listing of the deleted folder), unless a liveness poll found it first and re-provisioned already.
  const noticed = await call("workspace.files.list", target);
  if (noticed.ok && backend.mayReprovisionFirst) {
    // Not an empty listing of the deleted folder: the workers provisioned it again first.
    expect(
      await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["data_lost"] }, processBerth().db),
    ).toHaveLength(1);
    expect(names(noticed)).not.toContain("notes.txt");
  } else {
    expect(noticed).toMatchObject({ ok: false, error: { code: "CONFLICT" } });
    expect(!noticed.ok && noticed.error.message).toMatch(/files are gone/);
  }

  // The next use re-provisions through the worker: a fresh, empty folder, and the ledger says why.
  expect(names(await call("workspace.files.list", target))).not.toContain("notes.txt");
  expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db))?.state).toBe("READY");
  const events = await listWorkspaceEvents(
    tenant.scope,
    workspaceId,
    { kinds: ["data_lost"] },
    processBerth().db,
  );
  expect(events).toHaveLength(1);
  expect(events[0]!.reason).toMatch(/files are lost/);
  const provisions = (await readProvisionLog(controlDir)).filter((line) => line.startsWith("done"));
  expect(provisions).toHaveLength(2);
  expect(await fs.stat(folder).then((info) => info.isDirectory())).toBe(true);
  // The workspace works on the new folder (a Docker container on the deleted one would not show this).
  expect((await call("workspace.files.write", { ...target, path: "fresh.txt", content: "new" })).ok).toBe(
    true,
  );
  expect(await fs.readFile(path.join(folder, "fresh.txt"), "utf8")).toBe("new");
}
