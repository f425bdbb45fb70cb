/**
 * Issue 24: a worker killed in the middle of a revert. The worker (a separate process, real Postgres and
 * Redis, the default bubblewrap backend) has recorded the folder as it was (BEFORE_REVERT), deleted what
 * the checkpoint lacks and begun writing its files when it is SIGKILLed. Until the revert ends, the
 * half-restored workspace takes no lease (a web replica's write is a typed CONFLICT); a second worker
 * recovers the stalled job, finds the BEFORE_REVERT checkpoint already recorded (it does not take the
 * half-restored folder for it), and converges the folder to exactly the checkpoint.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { insertCheckpoint } from "@/server/modules/checkpoint/checkpoint.data";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { encodeTree, type TreeEntry } from "@/server/workspace/checkpoints/tree";
import { createTestTenant } from "../db/fixtures";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import type { ReplicaAnswer } from "./replica-process";

let children: Child[] = [];
let basedir: string | undefined;

afterEach(async (context) => {
  await stopChildren(children, context.task.result?.state === "fail");
  children = [];
  await closeProcessBerth();
  if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  basedir = undefined;
});

const FILES = 200;

describe("a worker killed mid-restore", { timeout: 180_000 }, () => {
  it("leaves the workspace refusing use until a second worker converges it to the checkpoint", async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-restore-")));
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    const checkpointDir = path.join(basedir, "checkpoints");
    const tenant = await createTestTenant();
    const env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mprk-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      BERTH_CHECKPOINT_DIR: checkpointDir,
      MP_CONTROL_DIR: controlDir,
      MP_USER_ID: tenant.owner.id,
      MP_USER_EMAIL: tenant.owner.email,
      // A killed worker's job is taken back within seconds, not BullMQ's default 30 s lock.
      WORKERS_LOCK_DURATION_MS: "3000",
      WORKERS_STALLED_INTERVAL_MS: "1000",
      LOG_LEVEL: "silent",
    };
    const firstWorker = startChild("worker-process.ts", env);
    const replica = startChild("replica-process.ts", env);
    children.push(firstWorker, replica);
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));

    let nextId = 0;
    const call = async (procedure: string, input: Record<string, unknown>) => {
      const id = ++nextId;
      replica.process.stdin.write(`${JSON.stringify({ id, path: procedure, input })}\n`);
      return JSON.parse(await replica.nextLine((l) => l.startsWith(`{"id":${id},`))) as ReplicaAnswer;
    };
    const ok = async <T>(procedure: string, input: Record<string, unknown>): Promise<T> => {
      const answer = await call(procedure, { tenantId: tenant.tenantId, ...input });
      if (!answer.ok) throw new Error(`${procedure}: ${answer.error.code} ${answer.error.message}`);
      return answer.result as T;
    };

    const agent = await ok<{ id: string }>("agent.create", {
      name: "restore-kill",
      modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "none", apiKey: "sk-none" },
    });
    const { sessionId, workspaceId } = await ok<{ sessionId: string; workspaceId: string }>(
      "session.create",
      { agentId: agent.id },
    );
    // The folder now: a file the checkpoint lacks (the restore deletes it first).
    await ok("workspace.files.write", { workspaceId, path: "stale.txt", content: "before the revert" });

    // A checkpoint of FILES files and a folder, put in the store the workers read.
    const store = new FolderCheckpointStore(checkpointDir);
    const fileEntry = async (name: string, text: string): Promise<TreeEntry> => {
      const blob = await store.putBlob(tenant.tenantId, Readable.from([Buffer.from(text)]));
      return {
        name,
        type: "file",
        mode: 0o644,
        size: blob.size,
        mtimeMs: 1_760_000_000_123.456,
        hash: blob.hash,
      };
    };
    const contentOf = (index: number) => `file ${index}\n`.repeat(200);
    const src = encodeTree([await fileEntry("keep.txt", "kept\n")]);
    await store.putTree(tenant.tenantId, src.hash, src.bytes);
    const files: TreeEntry[] = [];
    for (let index = 0; index < FILES; index += 1)
      files.push(await fileEntry(`f${index}.txt`, contentOf(index)));
    const root = encodeTree([...files, { name: "src", type: "dir", mode: 0o755, hash: src.hash }]);
    await store.putTree(tenant.tenantId, root.hash, root.bytes);
    const { generation } = await getWorkspace(tenant.scope, workspaceId, getDb());
    const checkpoint = await insertCheckpoint(
      tenant.scope,
      {
        workspaceId,
        generation,
        sessionId,
        turnId: null,
        status: "READY",
        rootTree: root.hash,
        baseTree: null,
      },
      getDb(),
    );

    // The revert begins; the worker is held after 20 file reads, then killed there.
    await fs.writeFile(path.join(controlDir, "block-restore"), "");
    const { restoreId } = await ok<{ restoreId: string }>("checkpoint.revert", {
      sessionId,
      checkpointId: checkpoint.id,
    });
    await vi.waitFor(
      async () =>
        expect((await readProvisionLog(controlDir)).some((line) => line.startsWith("restore-held"))).toBe(
          true,
        ),
      { timeout: 60_000, interval: 100 },
    );
    firstWorker.process.kill("SIGKILL");
    await firstWorker.exited;

    // Half-restored, and out of use: no lease but the restore's own.
    const restoring = await getDb().workspace.findUniqueOrThrow({
      where: { id: workspaceId },
      select: { restoringId: true },
    });
    expect(restoring.restoringId).toBe(restoreId);
    const refused = await call("workspace.files.write", {
      tenantId: tenant.tenantId,
      workspaceId,
      path: "meanwhile.txt",
      content: "x",
    });
    expect(refused).toMatchObject({ ok: false, error: { code: "CONFLICT" } });
    expect(await ok<{ status: string }>("checkpoint.restore", { restoreId })).toMatchObject({
      status: "RUNNING",
    });

    // A second worker takes the stalled job back and finishes it.
    await fs.rm(path.join(controlDir, "block-restore"));
    const secondWorker = startChild("worker-process.ts", env);
    children.push(secondWorker);
    await secondWorker.nextLine((line) => line === "ready");
    const done = await vi.waitFor(
      async () => {
        const restore = await ok<{ status: string; error: string | null }>("checkpoint.restore", {
          restoreId,
        });
        expect(restore.status).not.toBe("RUNNING");
        return restore;
      },
      { timeout: 90_000, interval: 250 },
    );
    expect(done).toMatchObject({ status: "DONE" });
    // The second run's progress, whole: what the first left to write, all of it written.
    const { written, toWrite } = done as unknown as { written: number; toWrite: number };
    expect(toWrite).toBeGreaterThan(0);
    expect(written).toBe(toWrite);

    // Exactly the checkpoint: every file with its bytes, the folder, nothing else.
    const listing = await ok<{ entries: { name: string }[] } | { name: string }[]>("workspace.files.list", {
      workspaceId,
    });
    const names = (Array.isArray(listing) ? listing : listing.entries).map((entry) => entry.name).sort();
    expect(names).toEqual([...files.map((file) => file.name), "src"].sort());
    for (const index of [0, 57, FILES - 1]) {
      const read = await ok<{ content: string }>("workspace.files.read", {
        workspaceId,
        path: `f${index}.txt`,
      });
      expect(read.content).toBe(contentOf(index));
    }
    // One BEFORE_REVERT checkpoint, of the folder before the revert (not the half-restored one).
    const safety = await getDb().workspaceCheckpoint.findMany({
      where: { tenantId: tenant.tenantId, workspaceId, kind: "BEFORE_REVERT" },
      select: { rootTree: true },
    });
    expect(safety).toHaveLength(1);
    const before = await store.readTree(tenant.tenantId, safety[0]!.rootTree!);
    const beforeNames = before.entries.map((entry) => entry.name);
    expect(beforeNames).toContain("stale.txt");
    expect(beforeNames).not.toContain("f0.txt");
  });
});
