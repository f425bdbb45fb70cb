/**
 * The robustness issue's large purge, in the real worker process (workers/main.ts, bundled as the other
 * children are): a workspace folder of 200,000 files, 3 data files and 2 MCP declarations. fs.promises.rm
 * stalled the worker's event loop for 11-16 s on a million files (SIGTERM answered 13 s late, past the 20 s
 * stop; at 3M files the job lock lapsed and a second worker purged at once and wrote a receipt of nothing).
 * Now: the loop never stalls over 200 ms while the worker purges and stops (event-loop-probe.ts), SIGTERM
 * mid-purge stops the worker cleanly within its stop budget without spending an attempt, and the next
 * worker finishes the purge: one purge, one receipt with the counts of before.
 * 200,000 files keep the bound meaningful at a fifth of the million's cost (making and deleting them is
 * most of this test's time): on Node 20, fs.promises.rm held a loop for 3.7 s on 100,000 files and 12 s
 * on 250,000 (the 2-core machine, loaded), so a deletion that blocked would miss the 200 ms bound many times
 * over. The folder is filled on tmpfs when there is one (/dev/shm): fast there, slow on a loaded disk.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { listPurgeReceipts } from "@/server/modules/audit/audit.data";
import {
  getWorkspace,
  listWorkspaceEvents,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import { jobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { createTestTenant } from "../db/fixtures";
import { isolatedRedisConfig, redisPrefixEnv, testLog } from "../queue/queue-fixtures";
import { bundled } from "./processes";
import { processBerth } from "@/server/composition/process-berth";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");
const FOLDERS = 200;
const FILES_PER_FOLDER = 1_000;
/** The bound on any stall of the worker's event loop while it purges. */
const MAX_STALL_MS = 200;
/** workers/main.ts' SHUTDOWN_DEADLINE_MS: past it the process exits 1 ("unclean"). */
const STOP_BUDGET_MS = 20_000;

type Worker = { child: ChildProcessWithoutNullStreams; output: () => string; exited: Promise<number | null> };

/** workers/main.ts with event-loop-probe.ts preloaded, both bundled (a start under tsx costs twice the CPU). */
function startWorker(env: Record<string, string>): Worker {
  const probe = pathToFileURL(bundled("event-loop-probe.ts")).href;
  const main = bundled(path.join("..", "..", "..", "workers", "main.ts"));
  const child = spawn(process.execPath, ["--import", probe, main], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: "debug", WORKERS_HEALTH_PORT: "0", ...env },
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Waits for `pattern` in the worker's output (failing at once if the worker exited). */
async function waitForOutput(worker: Worker, pattern: RegExp, timeout = 60_000): Promise<void> {
  await vi.waitFor(
    () => {
      if (!pattern.test(worker.output()) && worker.child.exitCode !== null)
        throw new Error(`worker exited (${worker.child.exitCode}):\n${worker.output().slice(-3000)}`);
      expect(worker.output()).toMatch(pattern);
    },
    { timeout, interval: 100 },
  );
}

/** The probe's stall reports among the worker's log lines (a stall shows what ran just before it). */
function diagnostics(worker: Worker): string {
  const lines = worker.output().split("\n");
  const stalls = lines.flatMap((line, index) =>
    line.startsWith("event-loop-probe stall") ? lines.slice(Math.max(0, index - 4), index + 1) : [],
  );
  return stalls.map((line) => line.slice(0, 400)).join("\n");
}

/** Starts measuring the worker's event loop (event-loop-probe.ts). */
async function armProbe(worker: Worker): Promise<void> {
  worker.child.kill("SIGUSR2");
  await waitForOutput(worker, /event-loop-probe armed/, 10_000);
}

/** SIGTERM; resolves with the exit code, how long the stop took and the worst stall the probe saw. */
async function stopWorker(
  worker: Worker,
): Promise<{ code: number | null; tookMs: number; maxBusyStallMs: number }> {
  const signalledAt = Date.now();
  worker.child.kill("SIGTERM");
  const code = await worker.exited;
  const tookMs = Date.now() - signalledAt;
  const stall = /event-loop-probe max-stall-ms=(\d+) max-busy-stall-ms=(-?\d+)/.exec(worker.output());
  if (!stall) throw new Error(`no probe report:\n${worker.output().slice(-3000)}`);
  console.info(
    `large-purge: worker ${worker.child.pid} stopped in ${tookMs} ms, longest stall ${stall[1]} ms ` +
      `(the loop busy for ${stall[2]} ms of it; the rest the machine's load)`,
  );
  // The bound is on the loop being held by the worker's own work, not on the scheduler's delays (the
  // probe's comment): CI runs this beside three other test streams on two cores.
  return { code, tookMs, maxBusyStallMs: Number(stall[2]) };
}

/** `FOLDERS` × `FILES_PER_FOLDER` empty files under `dir`, made by two child processes at once. */
async function fillWithFiles(dir: string): Promise<void> {
  const script = `
    const fs = require("node:fs"); const path = require("node:path");
    const [dir, from, to, files] = [process.argv[1], +process.argv[2], +process.argv[3], +process.argv[4]];
    for (let d = from; d < to; d++) {
      const folder = path.join(dir, "d" + d);
      fs.mkdirSync(folder, { recursive: true });
      for (let f = 0; f < files; f++) fs.closeSync(fs.openSync(path.join(folder, "f" + f), "w"));
    }`;
  const half = FOLDERS / 2;
  await Promise.all(
    [
      [0, half],
      [half, FOLDERS],
    ].map(
      ([from, to]) =>
        new Promise<void>((resolve, reject) => {
          const child = spawn(
            process.execPath,
            ["-e", script, dir, String(from), String(to), String(FILES_PER_FOLDER)],
            {
              stdio: "inherit",
            },
          );
          child.once("error", reject);
          child.once("exit", (code) =>
            code === 0 ? resolve() : reject(new Error(`filling exited ${code}`)),
          );
        }),
    ),
  );
}

describe("purging a workspace of 200,000 files in the worker process", { timeout: 300_000 }, () => {
  const workers: Worker[] = [];
  let basedir: string | undefined;

  afterEach(async () => {
    for (const worker of workers) if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
    await Promise.all(workers.map((worker) => worker.exited));
    if (basedir) await fsp.rm(basedir, { recursive: true, force: true });
  });

  it("never stalls the loop, stops on SIGTERM mid-purge, and the next worker finishes it: one receipt", async () => {
    const tmpfs = fs.existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
    basedir = await fsp.realpath(await fsp.mkdtemp(path.join(tmpfs, "berth-large-purge-")));
    await fsp.chmod(basedir, 0o711);
    const redis = isolatedRedisConfig();
    const connection = createRedisConnection(redis, "producer", "test-large-purge");
    const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    try {
      const enqueue = createEnqueue(queues);
      const tenant = await createTestTenant();
      const workspaceId = `large-purge-${randomBytes(4).toString("hex")}`;
      await upsertWorkspaceBinding(
        tenant.scope,
        {
          id: workspaceId,
          backendKind: "local",
          isolationPolicy: "PER_AGENT",
        },
        { config: processBerth().config.quotas },
        processBerth().db,
      );
      const env = {
        REDIS_URL: redis.url,
        BERTH_REDIS_PREFIX: redisPrefixEnv(redis),
        BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      };
      const first = startWorker(env);
      workers.push(first);
      await waitForOutput(first, /"msg":"workers started"/);
      const target = { tenantId: tenant.tenantId, workspaceId };
      await enqueue("workspace.provision", target);
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY"),
        {
          timeout: 60_000,
          interval: 200,
        },
      );
      const record = await getWorkspace(tenant.scope, workspaceId, processBerth().db);
      const folder = (record.backendHandle as { folder: string }).folder;
      await fsp.writeFile(
        path.join(folder, ".mcp"),
        JSON.stringify({
          version: 2,
          mcps: {
            "agent-1": {
              "": ["one", "two"].map((name) => ({
                name,
                is_stateful: true,
                mcp_config: { type: "stdio_mcp", command: "true" },
              })),
            },
          },
        }),
      );
      await fsp.mkdir(path.join(folder, "data"), { recursive: true });
      for (const name of ["a", "b", "c"]) await fsp.writeFile(path.join(folder, "data", name), name);
      const project = path.join(folder, "project");
      const fillingStarted = Date.now();
      await fillWithFiles(project);
      console.info(
        `large-purge: ${FOLDERS * FILES_PER_FOLDER} files made in ${Date.now() - fillingStarted} ms`,
      );

      await armProbe(first);
      const purgeStarted = Date.now();
      const job = await enqueue("workspace.purge", { ...target, reason: "large purge", actor: "test" });
      // Mid-purge: a twentieth of the folders gone.
      await vi.waitFor(async () => expect((await fsp.readdir(project)).length).toBeLessThan(FOLDERS * 0.95), {
        timeout: 120_000,
        interval: 100,
      });
      const stopped = await stopWorker(first);
      expect(stopped.code, first.output().slice(-3000)).toBe(0);
      expect(stopped.tookMs).toBeLessThan(STOP_BUDGET_MS);
      expect(first.output()).toMatch(/"msg":"stopped"/);
      expect(stopped.maxBusyStallMs, diagnostics(first)).toBeLessThan(MAX_STALL_MS);
      // Interrupted, not failed: still PURGING, part of the folder left, no receipt, no attempt spent.
      expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PURGING");
      expect((await fsp.readdir(project)).length).toBeGreaterThan(0);
      expect(
        await listPurgeReceipts(
          tenant.scope,
          { targetType: "workspace", targetId: workspaceId },
          processBerth().db,
        ),
      ).toEqual([]);
      const interrupted = await queues.get("workspace").getJob(job.id!);
      expect(interrupted?.attemptsMade).toBe(0);
      expect(["waiting", "delayed"]).toContain(await interrupted?.getState());

      const foldersLeft = (await fsp.readdir(project)).length;
      const second = startWorker(env);
      workers.push(second);
      // Measured from when it has resumed deleting: a fresh process' own start (loading modules, the
      // database client's first queries) stalls its loop once, purge or not, and is not what is measured.
      await vi.waitFor(
        async () => expect((await fsp.readdir(project)).length).toBeLessThan(foldersLeft - 5),
        {
          timeout: 120_000,
          interval: 100,
        },
      );
      await armProbe(second);
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PURGED"),
        {
          timeout: 180_000,
          interval: 250,
        },
      );
      console.info(`large-purge: purged (across the restart) in ${Date.now() - purgeStarted} ms`);
      const finished = await stopWorker(second);
      expect(finished.code, second.output().slice(-3000)).toBe(0);
      expect(finished.maxBusyStallMs, diagnostics(second)).toBeLessThan(MAX_STALL_MS);

      expect(fs.existsSync(folder)).toBe(false);
      const receipts = await listPurgeReceipts(
        tenant.scope,
        {
          targetType: "workspace",
          targetId: workspaceId,
        },
        processBerth().db,
      );
      expect(receipts).toHaveLength(1);
      expect(receipts[0]!.deleted).toMatchObject({
        dataFiles: 3,
        mcpDeclarations: ["agent-1/-/one", "agent-1/-/two"],
        resources: [`directory:${folder}`],
      });
      const kinds = (await listWorkspaceEvents(tenant.scope, workspaceId, undefined, processBerth().db)).map(
        (event) => event.kind,
      );
      expect(kinds.filter((kind) => kind === "purging")).toHaveLength(1);
      expect(kinds.filter((kind) => kind === "purged")).toHaveLength(1);
      expect((await queues.get("workspace").getJob(job.id!))?.finishedOn).toBeGreaterThan(0);
    } finally {
      await queues.close();
      await connection.quit();
    }
  });
});
