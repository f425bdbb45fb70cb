/**
 * Terminals across API replicas without sticky sessions: two API processes (terminal-api-process.ts, the
 * composition and upgrade handler npm start serves) and a worker process, real Postgres, Redis and the
 * confined local backend. A shell opened through the first replica is reattached through the second and
 * keeps its state (a variable set before), its size follows the new connection, a takeover back on the
 * owner tells the relayed connection, a goodbye through the relay ends the shell and its lease, and an
 * owner that dies breaks the relayed connection so the browser reconnects (and learns the shell ended).
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { createTenantFixture, type TenantFixture } from "@/test/integration/api/support/tenant-fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "./processes";
import { provisionReadyLocalWorkspace } from "../workspace/provision-ready";
import { closeProcessBerth } from "@/server/composition/process-berth";

const ORIGIN = "http://berth.test";
type Opened = {
  ws: WebSocket;
  ready: { terminalId: string; reattached: boolean };
  output: () => string;
  closed: Promise<number>;
};

describe("terminals across API replicas", { timeout: 120_000 }, () => {
  let worker: Child;
  let replicas: Child[] = [];
  let ports: number[] = [];
  let basedir: string;
  let env: Record<string, string>;
  let a: TenantFixture;
  let workspaceId: string;

  const startReplica = async () => {
    const child = startChild("terminal-api-process.ts", env);
    const port = Number((await child.nextLine((line) => line.startsWith("ready "))).split(" ")[1]);
    replicas.push(child);
    ports.push(port);
  };

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-term-")));
    // The sandboxed backend's workspace uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    env = {
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      BERTH_BASE_URL: ORIGIN,
      MP_CONTROL_DIR: await makeControlDir(basedir),
      LOG_LEVEL: "silent",
    };
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: ORIGIN,
      prisma: getDb(),
      log: () => {},
    });
    a = await createTenantFixture({ auth } as Parameters<typeof createTenantFixture>[0], "mpterm");
    worker = startChild("worker-process.ts", env);
    await worker.nextLine((line) => line === "ready");
    workspaceId = await provisionReadyLocalWorkspace(
      a.ownerScope,
      `ws-mpterm-${a.tenant.slug}`,
      "test: terminal",
    );
  });

  afterEach(async (context) => {
    await stopChildren(replicas, context.task.result?.state === "fail");
    replicas = [];
    ports = [];
  });

  afterAll(async () => {
    await stopChildren(worker ? [worker] : [], false);
    await closeProcessBerth();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  const url = (port: number, query: Record<string, string>) =>
    `ws://127.0.0.1:${port}/api/workspaces/${encodeURIComponent(workspaceId)}/terminal?${new URLSearchParams({ tenantSlug: a.tenant.slug, ...query })}`;

  function open(
    port: number,
    query: Record<string, string> = {},
    headers?: Record<string, string>,
  ): Promise<Opened> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url(port, query), {
        headers: headers ?? { authorization: `Bearer ${a.adminKey.plainKey}` },
      });
      let seen = "";
      const closed = new Promise<number>((done) => ws.once("close", (code) => done(code)));
      ws.on("message", (data, isBinary) => {
        if (isBinary) {
          seen += (data as Buffer).toString();
          return;
        }
        const message = JSON.parse((data as Buffer).toString()) as Opened["ready"] & { type: string };
        if (message.type === "ready") resolve({ ws, ready: message, output: () => seen, closed });
      });
      ws.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
      ws.once("error", reject);
    });
  }

  async function until<T>(
    what: string,
    probe: () => T | false | null | Promise<T | false | null>,
    timeoutMs = 15_000,
  ) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const type = (opened: Opened, data: string) => opened.ws.send(JSON.stringify({ type: "input", data }));
  const leaseOf = (terminalId: string) =>
    getDb().workspaceLease.findFirst({ where: { workspaceId, holder: `terminal:${terminalId}` } });

  it("reattaches through another replica with the shell's state, and a goodbye there ends it", async () => {
    await startReplica();
    await startReplica();
    const [owner, other] = ports as [number, number];

    const first = await open(owner);
    type(first, "export BERTH_MARK=kept-$((6*7)); echo marked-$((1+1))\n");
    await until("the mark", () => /^marked-2\r?$/m.test(first.output()));
    first.ws.terminate(); // a dead connection: the next one may land on any replica

    // Only the same caller gets it back, on the relay too (the owner's cookie is another caller than the key).
    await expect(
      open(other, { terminal: first.ready.terminalId }, { cookie: a.owner.cookie, origin: ORIGIN }),
    ).rejects.toThrow(/refused: 404/);
    const relayed = await open(other, { terminal: first.ready.terminalId, cols: "100", rows: "33" });
    expect(relayed.ready).toEqual({ type: "ready", terminalId: first.ready.terminalId, reattached: true });
    await until("the replay", () => relayed.output().includes("marked-2"));
    type(relayed, 'echo "value=$BERTH_MARK"; stty size\n');
    await until("the variable", () => /^value=kept-42\r?$/m.test(relayed.output()));
    expect(relayed.output()).toMatch(/^33 100\r?$/m);
    // The shell stays where it started: the lease is the owner's, not the relay's.
    expect(await leaseOf(first.ready.terminalId)).not.toBeNull();

    // Taken over on the owner itself: the relayed connection is told, like a second tab.
    const back = await open(owner, { terminal: first.ready.terminalId });
    expect(await relayed.closed).toBe(4409);
    await until("the replay on the owner", () => back.output().includes("value=kept-42"));
    back.ws.terminate();

    const again = await open(other, { terminal: first.ready.terminalId });
    type(again, "echo still-$((2+2))\n");
    await until("the echo", () => /^still-4\r?$/m.test(again.output()));
    again.ws.send(JSON.stringify({ type: "close" }));
    expect(await again.closed).toBe(1000);
    await until("the lease's release", async () => (await leaseOf(first.ready.terminalId)) === null);
    const closeAudit = await until("the close audit", () =>
      getDb().auditLog.findFirst({
        where: {
          tenantId: a.tenant.id,
          action: "workspace.terminal.close",
          details: { path: ["terminalId"], equals: first.ready.terminalId },
        },
      }),
    );
    expect(closeAudit.details).toMatchObject({ reason: "closed" });
    await expect(open(other, { terminal: first.ready.terminalId })).rejects.toThrow(/refused: 404/);
  });

  it("breaks the relayed connection when the owner dies, and the shell is then gone", async () => {
    await startReplica();
    await startReplica();
    const [owner, other] = ports as [number, number];
    const first = await open(owner);
    first.ws.terminate();
    const relayed = await open(other, { terminal: first.ready.terminalId });
    type(relayed, "echo alive-$((3+3))\n");
    await until("the echo", () => /^alive-6\r?$/m.test(relayed.output()));

    replicas[0]!.process.kill("SIGKILL");
    // 1011: not a goodbye, so the browser reconnects, and hears the terminal ended.
    expect(await relayed.closed).toBe(1011);
    await expect(open(other, { terminal: first.ready.terminalId })).rejects.toThrow(/refused: 404/);
  });
});
