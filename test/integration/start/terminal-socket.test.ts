/**
 * The terminal WebSocket (server/api/terminal-socket.ts) against the composition `npm start` builds: a real
 * Berth process (scripts/start.ts, workers in-process) on a workspace its workers provisioned on the
 * confined local backend. Auth (cookie, origin), roles (viewer refused, a member on someone else's
 * workspace refused), cross-tenant refusals, a shell that echoes, resizes and exits, the lease held while
 * open and released on a goodbye, on exit and (bounded) after a dead connection, reattach, and the audit.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { addMember } from "@/server/modules/member/member.data";
import { createAgent } from "@/server/modules/agent/agent.data";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { findFreePort } from "@/scripts/services/ports";
import { type RunningBerth, startBerth } from "@/test/e2e/support/berth-server";
import {
  createTenantFixture,
  FIXTURE_PASSWORD,
  signInCookie,
  type TenantFixture,
} from "@/test/integration/api/support/tenant-fixtures";
import { provisionReadyLocalWorkspace } from "../workspace/provision-ready";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

// The server's reattach grace, shorter than the default 30 s so the dead-connection case does not wait it out;
// long enough that the reattach below (two local WebSocket opens) lands inside it on a loaded machine.
const REATTACH_GRACE_MS = 5_000;

type Opened = { ws: WebSocket; ready: { terminalId: string; reattached: boolean }; output: () => string };

describe("the terminal WebSocket on npm start's server", () => {
  let app: RunningBerth;
  let baseUrl: string;
  let dataDir: string;
  let a: TenantFixture;
  let b: TenantFixture;
  let memberCookie: string;
  let workspaceId: string;

  beforeAll(async () => {
    const port = await findFreePort();
    baseUrl = `http://127.0.0.1:${port}`;
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-terminal-"));
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl,
      prisma: getDb(),
      log: () => {},
    });
    const runtime = { auth } as Parameters<typeof createTenantFixture>[0];
    a = await createTenantFixture(runtime, "terma");
    b = await createTenantFixture(runtime, "termb");
    const memberEmail = `member-${a.tenant.slug}@example.test`;
    const { user } = await auth.api.signUpEmail({
      body: { email: memberEmail, password: FIXTURE_PASSWORD, name: "Member" },
    });
    await addMember(a.ownerScope, { userId: user.id, role: "member" }, processBerth().db);
    memberCookie = await signInCookie(auth, memberEmail, FIXTURE_PASSWORD);

    app = await startBerth(port, {
      ...process.env,
      BERTH_DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      BERTH_TERMINAL_REATTACH_GRACE_MS: String(REATTACH_GRACE_MS),
    });
    // Its agent's environment variables are the shell's too, as in the agent's own commands.
    const agent = await createAgent(
      a.ownerScope,
      {
        name: "terminal-agent",
        modelConfig: { provider: "openai-compatible", model: "m" },
        env: { TERMINAL_GREETING: "from-the-agent" },
      },
      secretKeyFromBytes(randomBytes(32)),
      processBerth().db,
    );
    workspaceId = await provisionReadyLocalWorkspace(
      a.ownerScope,
      `ws-term-${a.tenant.slug}`,
      "test: terminal",
      agent.id,
    );
  }, 900_000);

  afterAll(async () => {
    await closeProcessBerth();
    await app?.stop();
    await closeProcessBerth();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const url = (query: Record<string, string>, id = workspaceId) =>
    `${baseUrl.replace("http", "ws")}/api/workspaces/${encodeURIComponent(id)}/terminal?${new URLSearchParams(query)}`;

  /** The HTTP status of a refused upgrade, or "open" when it was accepted. */
  function attempt(target: string, headers: Record<string, string>): Promise<number | "open"> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(target, { headers });
      ws.once("unexpected-response", (_req, res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      ws.once("open", () => {
        ws.terminate();
        resolve("open");
      });
      ws.once("error", (error) =>
        error.message.includes("Unexpected server response") ? undefined : reject(error),
      );
    });
  }

  function open(query: Record<string, string>, cookie = a.owner.cookie): Promise<Opened> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url(query), { headers: { cookie, origin: baseUrl } });
      let seen = "";
      ws.on("message", (data, isBinary) => {
        if (isBinary) {
          seen += (data as Buffer).toString();
          return;
        }
        const message = JSON.parse((data as Buffer).toString()) as {
          type: string;
          terminalId: string;
          reattached: boolean;
        };
        if (message.type === "ready") resolve({ ws, ready: message, output: () => seen });
      });
      ws.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
      ws.once("error", reject);
    });
  }

  async function until<T>(
    what: string,
    probe: () => T | null | undefined | false | Promise<T | null | undefined | false>,
    timeoutMs = 15_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  const leaseOf = (terminalId: string) =>
    getDb().workspaceLease.findFirst({ where: { workspaceId, holder: `terminal:${terminalId}` } });
  const auditOf = (action: string, terminalId: string) =>
    getDb().auditLog.findFirst({
      where: { tenantId: a.tenant.id, action, details: { path: ["terminalId"], equals: terminalId } },
    });

  it("refuses what the file-edit rules refuse, before the upgrade", async () => {
    const own = { tenantSlug: a.tenant.slug };
    // Cookie auth needs Berth's own Origin (WebSockets have no CORS).
    expect(await attempt(url(own), { cookie: a.owner.cookie })).toBe(403);
    expect(await attempt(url(own), { cookie: a.owner.cookie, origin: "https://evil.example" })).toBe(403);
    expect(await attempt(url(own), { origin: baseUrl })).toBe(401);
    // Viewers read; they cannot open a shell.
    expect(await attempt(url(own), { cookie: a.viewer.cookie, origin: baseUrl })).toBe(403);
    expect(await attempt(url(own), { authorization: `Bearer ${a.viewerKey.plainKey}` })).toBe(403);
    // A member reaches only their own sessions' workspaces: this one is not theirs.
    expect(await attempt(url(own), { cookie: memberCookie, origin: baseUrl })).toBe(404);
    // Another tenant: not a member of A; its own tenant does not have A's workspace.
    expect(await attempt(url(own), { cookie: b.owner.cookie, origin: baseUrl })).toBe(403);
    expect(
      await attempt(url({ tenantSlug: b.tenant.slug }), { cookie: b.owner.cookie, origin: baseUrl }),
    ).toBe(404);
    expect(
      await attempt(url({ tenantSlug: b.tenant.slug }), { authorization: `Bearer ${b.adminKey.plainKey}` }),
    ).toBe(404);
    expect(
      await attempt(url({ tenantSlug: a.tenant.slug, cols: "0" }), {
        cookie: a.owner.cookie,
        origin: baseUrl,
      }),
    ).toBe(400);
    expect(await attempt(url(own).replace("/terminal", "/terminals"), { origin: baseUrl })).toBe(404);
  });

  it("runs a shell that echoes and resizes while holding a lease, and a goodbye ends both", async () => {
    const { ws, ready, output } = await open({ tenantSlug: a.tenant.slug, cols: "90", rows: "30" });
    expect(ready.reattached).toBe(false);
    const lease = await until("the lease", () => leaseOf(ready.terminalId));
    expect(lease.expiresAt!.getTime()).toBeGreaterThan(Date.now());
    ws.send(JSON.stringify({ type: "input", data: "stty size; echo hello-$((40+2))-$TERMINAL_GREETING\n" }));
    await until("echo", () => /^hello-42-from-the-agent\r?$/m.test(output()));
    expect(output()).toMatch(/^30 90\r?$/m);
    ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
    ws.send(JSON.stringify({ type: "input", data: "stty size\n" }));
    await until("the new size", () => /^40 120\r?$/m.test(output()));
    expect(await auditOf("workspace.terminal.open", ready.terminalId)).toMatchObject({ outcome: "success" });

    ws.send(JSON.stringify({ type: "close" }));
    await until("the lease's release", async () => (await leaseOf(ready.terminalId)) === null);
    const closed = await until("the close audit", () =>
      auditOf("workspace.terminal.close", ready.terminalId),
    );
    expect(closed.details).toMatchObject({ reason: "closed" });
  });

  it("reattaches after a dropped connection, and releases the lease when nobody comes back", async () => {
    const first = await open({ tenantSlug: a.tenant.slug });
    first.ws.send(JSON.stringify({ type: "input", data: "echo before-$((1+1))\n" }));
    await until("echo", () => /^before-2\r?$/m.test(first.output()));
    first.ws.terminate(); // no close frame: a dead connection

    // Only the same caller gets it back.
    await expect(
      open({ tenantSlug: a.tenant.slug, terminal: first.ready.terminalId }, memberCookie),
    ).rejects.toThrow(/refused/);
    const again = await open({ tenantSlug: a.tenant.slug, terminal: first.ready.terminalId });
    expect(again.ready).toEqual({ type: "ready", terminalId: first.ready.terminalId, reattached: true });
    await until("the replay", () => again.output().includes("before-2"));
    again.ws.send(JSON.stringify({ type: "input", data: "echo after-$((2+1))\n" }));
    await until("echo", () => /^after-3\r?$/m.test(again.output()));

    again.ws.terminate();
    const dropped = Date.now();
    expect(await leaseOf(first.ready.terminalId)).not.toBeNull();
    // The reattach grace bounds how long a dead connection holds the workspace: not released before it.
    await until(
      "the lease's release",
      async () => (await leaseOf(first.ready.terminalId)) === null,
      REATTACH_GRACE_MS + 15_000,
    );
    expect(Date.now() - dropped).toBeGreaterThanOrEqual(REATTACH_GRACE_MS);
    const closed = await until("the close audit", () =>
      auditOf("workspace.terminal.close", first.ready.terminalId),
    );
    expect(closed.details).toMatchObject({ reason: "detached" });
  }, 60_000);

  it("tells the client when the shell exits, and releases the lease", async () => {
    const { ws, ready } = await open({ tenantSlug: a.tenant.slug });
    const exit = new Promise<unknown>((resolve) =>
      ws.on("message", (data, isBinary) => {
        if (!isBinary) {
          const message = JSON.parse((data as Buffer).toString()) as { type: string };
          if (message.type === "exit") resolve(message);
        }
      }),
    );
    ws.send(JSON.stringify({ type: "input", data: "exit 3\n" }));
    expect(await exit).toEqual({ type: "exit", exitCode: 3 });
    await until("the lease's release", async () => (await leaseOf(ready.terminalId)) === null);
  });
});
