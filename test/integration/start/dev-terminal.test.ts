/**
 * The terminal under `npm run dev`: the development command runs Next's development server inside
 * Berth's own server (scripts/start.ts --dev), which serves the terminal WebSocket as npm start does and
 * passes every other upgrade (the hot reload's) to Next. Under a plain `next dev` the upgrade reached
 * nobody and the dashboard's terminal could never connect. The workers run apart, as in development.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { findFreePort } from "@/scripts/services/ports";
import { createTenantFixture, type TenantFixture } from "@/test/integration/api/support/tenant-fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "../multiprocess/processes";
import { startBerthProcess, type StartedBerth } from "./support/start-process";
import { provisionReadyLocalWorkspace } from "../workspace/provision-ready";
import { closeProcessBerth } from "@/server/composition/process-berth";

/** `promise`, or a failure naming `what` after `ms` (a hung step must say which one it was). */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe("npm run dev serves the terminal WebSocket", { timeout: 300_000 }, () => {
  let dev: StartedBerth | undefined;
  let worker: Child | undefined;
  let basedir: string;
  let port: number;
  let a: TenantFixture;
  let workspaceId: string;

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-dev-term-")));
    await fs.chmod(basedir, 0o711);
    port = await findFreePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const env = {
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      MP_CONTROL_DIR: await makeControlDir(basedir),
      LOG_LEVEL: "warn",
    };
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl,
      prisma: getDb(),
      log: () => {},
    });
    a = await createTenantFixture({ auth } as Parameters<typeof createTenantFixture>[0], "devterm");
    worker = startChild("worker-process.ts", env);
    dev = startBerthProcess({
      via: "npm",
      dev: true,
      port,
      env: {
        ...process.env,
        ...env,
        HOST: "127.0.0.1",
        BERTH_BASE_URL: baseUrl,
        BERTH_DATA_DIR: path.join(basedir, "data"),
      },
    });
    await worker.nextLine((line) => line === "ready");
    workspaceId = await provisionReadyLocalWorkspace(
      a.ownerScope,
      `ws-devterm-${a.tenant.slug}`,
      "test: dev terminal",
    );
    await dev.waitFor(/Berth is running at/);
  }, 300_000);

  afterEach((context) => {
    if (context.task.result?.state === "fail") console.error(dev?.lines.slice(-60).join("\n"));
  });

  afterAll(async () => {
    await dev?.stop();
    await stopChildren(worker ? [worker] : [], false);
    await closeProcessBerth();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("opens a shell through the development server, and Next still gets its hot-reload upgrades", async () => {
    await within(10_000, "the workers hint", dev!.waitFor(/run the workers with `npm run workers`/));
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/api/workspaces/${encodeURIComponent(workspaceId)}/terminal?tenantSlug=${a.tenant.slug}`,
      { headers: { authorization: `Bearer ${a.adminKey.plainKey}` } },
    );
    let seen = "";
    const ready = new Promise<void>((resolve, reject) => {
      ws.on("message", (data, isBinary) => {
        if (isBinary) seen += (data as Buffer).toString();
        else if ((JSON.parse((data as Buffer).toString()) as { type: string }).type === "ready") resolve();
      });
      ws.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
      ws.once("error", reject);
    });
    await within(30_000, "the terminal's ready", ready);
    ws.send(JSON.stringify({ type: "input", data: "echo dev-$((20+22))\n" }));
    await expect.poll(() => /^dev-42\r?$/m.test(seen), { timeout: 15_000 }).toBe(true);
    ws.send(JSON.stringify({ type: "close" }));
    await new Promise((resolve) => ws.once("close", resolve));

    // Another upgrade is Next's (its development server's hot reload), not refused as an unknown path.
    // Next listens for it from its first request on, and a browser loads a page before it connects.
    await fetch(`http://127.0.0.1:${port}/_next/static/none.js`).then((response) => response.body?.cancel());
    const hmr = new Promise<number | "open">((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/_next/hmr`, {
        headers: { origin: `http://127.0.0.1:${port}` },
      });
      socket.once("open", () => {
        socket.terminate();
        resolve("open");
      });
      socket.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      socket.once("error", (error) =>
        error.message.includes("Unexpected server response") ? undefined : reject(error),
      );
    });
    expect(await within(60_000, "the hot-reload upgrade", hmr)).toBe("open");
  });
});
