/**
 * Web security through the composition `npm start` builds (scripts/start.ts: its HTTP server, Next, the
 * route handlers, workers in-process), against the test Postgres/Redis, with a real Chromium:
 * chat.send only as a streamed POST (typed client: events; an aborted request leaves the turn running, only
 * chat.cancel or chat.run's signal cancels it), cross-site cookie
 * POSTs refused with a typed 403, the client address taken from the socket (not X-Forwarded-For), a
 * same-origin-only sign-in redirect, security headers and a CSP the dashboard runs under without a single
 * violation, and early upload refusals that leave keep-alive connections usable.
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { addMember } from "@/server/modules/member/member.data";
import { getSession } from "@/server/modules/session/session.data";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

type TurnEvent = { type: string; text?: string; status?: string };

describe.skipIf(!HAS_CHROMIUM)("web security under npm start", () => {
  let e2e: E2eApp;
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let client: BerthClient;
  let cookie: string;
  let fake: FakeModelServer;
  let agentId: string;
  let apiKey: string;

  const auth = () =>
    createAuth({ secret: process.env.BERTH_AUTH_SECRET!, baseUrl: app.url, prisma: getDb(), log: () => {} });

  async function signInCookie(email: string, password: string): Promise<string> {
    const response = await fetch(`${app.url}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: app.url },
      body: JSON.stringify({ email, password }),
    });
    expect(response.status).toBe(200);
    return response.headers
      .getSetCookie()
      .map((line) => line.split(";")[0]!)
      .join("; ");
  }

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    fake = await startFakeModel();
    const { plainKey } = await createApiKey(
      auth(),
      tenant.scope,
      { name: "web-security", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    apiKey = plainKey;
    client = createBerthClient({ url: app.url, apiKey: plainKey });
    cookie = await signInCookie(tenant.email, tenant.password);
    const agent = await client.agent.create.mutate({
      name: `chat-${randomBytes(3).toString("hex")}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model" },
    });
    agentId = agent.id;
  });

  afterAll(async () => {
    await fake?.close();
    await e2e?.close();
  });

  async function newSession(): Promise<string> {
    return (await client.session.create.mutate({ agentId })).sessionId;
  }

  it("streams a chat turn to the typed client over POST, and never starts one on a GET", async () => {
    const sessionId = await newSession();
    fake.enqueue({ kind: "text", text: ["Hello ", "from ", "Berth."] });
    const events: TurnEvent[] = [];
    for await (const event of await client.chat.send.mutate({ sessionId, message: "hi" })) {
      events.push(event);
    }
    const text = events.filter((e) => e.type === "text-delta").map((e) => e.text ?? "");
    expect(text.join("")).toBe("Hello from Berth.");
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });

    // What a cross-site link or <img> would do: a GET with the victim's cookie.
    const before = fake.requests.length;
    const input = encodeURIComponent(
      JSON.stringify({ json: { tenantSlug: tenant.slug, sessionId, message: "x" } }),
    );
    const viaGet = await fetch(`${app.url}/api/trpc/chat.send?input=${input}`, { headers: { cookie } });
    expect(viaGet.status).toBe(405);
    expect(fake.requests.length).toBe(before);
  });

  it("aborting the request leaves the turn running (only chat.cancel stops it); chat.run's signal cancels explicitly", async () => {
    const sessionId = await newSession();
    fake.enqueue({ kind: "stall", text: ["thinking"] });
    const controller = new AbortController();
    const events = await client.chat.send.mutate(
      { sessionId, message: "take your time" },
      { signal: controller.signal },
    );
    const iterator = events[Symbol.asyncIterator]();
    expect(await iterator.next()).toMatchObject({ value: { type: "text-delta" } });
    controller.abort();
    // A closed tab or a reload is no cancel: the turn still holds the session, and attaching shows it.
    expect((await getSession(tenant.scope, sessionId, processBerth().db)).status).toBe("RUNNING");
    const attached = await client.chat.attach.query({ sessionId });
    const replay = attached[Symbol.asyncIterator]();
    expect(await replay.next()).toMatchObject({
      value: { seq: 1, event: { type: "text-delta", text: "thinking" } },
    });
    await client.chat.cancel.mutate({ sessionId });
    const ended: TurnEvent[] = [];
    for (let next = await replay.next(); !next.done; next = await replay.next()) ended.push(next.value.event);
    expect(ended.at(-1)).toMatchObject({ type: "done", status: "cancelled" });

    // chat.run's own signal is an explicit cancel: aborting it cancels the turn.
    fake.enqueue({ kind: "stall", text: ["again"] });
    const run = new AbortController();
    const running = client.chat.run(
      { sessionId, message: "and again" },
      { signal: run.signal, onEvent: (event) => event.type === "text-delta" && run.abort() },
    );
    await expect(running).rejects.toThrow();
    await vi.waitFor(
      async () => expect((await getSession(tenant.scope, sessionId, processBerth().db)).status).toBe("IDLE"),
      {
        timeout: 20_000,
        interval: 100,
      },
    );
    const turns = await client.chat.turns.query({ sessionId });
    expect(turns.map((turn) => turn.status)).toEqual(["CANCELLED", "CANCELLED"]);
  });

  it("refuses cross-site cookie POSTs with a typed 403, and lets same-origin and Bearer calls through", async () => {
    const sessionId = await newSession();
    const body = JSON.stringify({ json: { tenantSlug: tenant.slug, sessionId, message: "pwned" } });
    const before = fake.requests.length;
    const crossSite: Record<string, string>[] = [
      { origin: "https://evil.example" },
      { "sec-fetch-site": "cross-site" },
    ];
    for (const site of crossSite) {
      const response = await fetch(`${app.url}/api/trpc/chat.send`, {
        method: "POST",
        // What a cross-site form or fetch can send: no tRPC streaming headers needed to reach the check.
        headers: { cookie, "content-type": "application/json", ...site },
        body,
      });
      expect(response.status).toBe(403);
      const error = (await response.json()) as {
        error: { json: { data: { code: string; appError: unknown } } };
      };
      expect(error.error.json.data).toMatchObject({
        code: "FORBIDDEN",
        appError: { details: { reason: "cross_origin" } },
      });
    }
    const upload = await fetch(`${app.url}/api/workspaces/any/skills?tenantSlug=${tenant.slug}`, {
      method: "POST",
      headers: { cookie, origin: "https://evil.example", "content-type": "multipart/form-data; boundary=x" },
      body: "--x--\r\n",
    });
    expect(upload.status).toBe(403);
    expect(fake.requests.length).toBe(before);

    const sameOrigin = await fetch(`${app.url}/api/trpc/chat.cancel`, {
      method: "POST",
      headers: {
        cookie,
        "content-type": "application/json",
        origin: app.url,
        "sec-fetch-site": "same-origin",
      },
      body: JSON.stringify({ json: { tenantSlug: tenant.slug, sessionId } }),
    });
    expect(sameOrigin.status).toBe(200);
    await expect(client.chat.cancel.mutate({ sessionId })).resolves.toEqual({ cancelled: false });
  });

  it("sends security headers on pages, API answers and static files", async () => {
    const page = await fetch(`${app.url}/sign-in`);
    const html = await page.text();
    const csp = page.headers.get("content-security-policy") ?? "";
    const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeTruthy();
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/script-src[^;]*'unsafe-inline'/);
    expect(html).toContain(`nonce="${nonce}"`);
    const script = /<script[^>]+src="([^"]+)"/.exec(html)?.[1];
    for (const response of [page, await fetch(`${app.url}/api/health`), await fetch(`${app.url}${script}`)]) {
      expect(response.headers.get("x-frame-options")).toBe("DENY");
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      expect(response.headers.get("referrer-policy")).toBe("strict-origin-when-cross-origin");
      expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    }
  });

  it("runs the dashboard in Chromium under the CSP without a violation, and refuses to be framed", async () => {
    const context = await browser.newContext();
    await context.addInitScript(() => {
      const seen: string[] = [];
      (window as unknown as { cspViolations: string[] }).cspViolations = seen;
      document.addEventListener("securitypolicyviolation", (event) =>
        seen.push(`${event.violatedDirective} ${event.blockedURI}`),
      );
    });
    const { page, pageErrors } = await watchedPage(context);
    const consoleCsp: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) consoleCsp.push(message.text());
    });
    // ?next= with a tab (browsers drop it, making `//evil.example`): sign-in must stay on Berth.
    await page.goto(`${app.url}/sign-in?next=${encodeURIComponent("/\t/evil.example")}`);
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL((url) => url.origin === app.url && url.pathname.startsWith("/t/"));
    for (const section of [
      "",
      "/agents",
      "/sessions",
      "/workspaces",
      "/api-keys",
      "/members",
      "/audit",
      "/jobs",
    ]) {
      await page.goto(`${app.url}/t/${tenant.slug}${section}`);
      await page.waitForLoadState("networkidle");
      expect(
        await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations),
      ).toEqual([]);
    }
    // Hydrated (React ran under the CSP): client navigation works.
    await page.getByRole("link", { name: "Agents" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents$`));
    expect(consoleCsp).toEqual([]);
    expect(pageErrors).toEqual([]);

    // Another site framing the API-keys page gets nothing.
    const framer = await context.newPage();
    await framer.setContent(`<iframe id="f" src="${app.url}/t/${tenant.slug}/api-keys"></iframe>`);
    await framer.waitForTimeout(0);
    await vi.waitFor(async () => {
      const frame = framer.frames().find((f) => f !== framer.mainFrame());
      expect(frame).toBeDefined();
      expect(await frame!.content().catch(() => "")).not.toContain("API keys");
    });
    await context.close();
  });

  it("keeps a keep-alive connection usable after an early refusal of an upload", async () => {
    const socket = await openSocket(app.url);
    try {
      const body = Buffer.alloc(2 * 1024 * 1024, 97);
      socket.write(
        `POST /api/workspaces/any/skills HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n` +
          `Content-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n`,
      );
      socket.write(body);
      const first = await readResponse(socket);
      expect(first.status).toBe(401);
      socket.write(`GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`);
      const second = await readResponse(socket);
      expect(second.status).toBe(200);
    } finally {
      socket.destroy();
    }

    // Refused after the route began reading (an authenticated folder upload whose manifest is not JSON,
    // followed by 2 MiB of file): the 422 must arrive, and the connection must stay usable. Before the
    // route read the rest itself, the answer never reached the client and the socket timed out.
    const started = await openSocket(app.url);
    try {
      const boundary = "berth-boundary";
      const head = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="manifest"\r\n\r\nnot json\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="a/SKILL.md"\r\n` +
          `Content-Type: application/octet-stream\r\n\r\n`,
      );
      const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
      const upload = Buffer.concat([head, Buffer.alloc(2 * 1024 * 1024, 97), tail]);
      started.write(
        `POST /api/workspaces/ws-drain/skills?agentId=${agentId} HTTP/1.1\r\nHost: x\r\n` +
          `Authorization: Bearer ${apiKey}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n` +
          `Content-Length: ${upload.length}\r\nConnection: keep-alive\r\n\r\n`,
      );
      started.write(upload);
      const refused = await readResponse(started);
      expect(refused.status).toBe(422);
      started.write(`GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`);
      expect((await readResponse(started)).status).toBe(200);
    } finally {
      started.destroy();
    }

    // A declared body too large to drain: answered, then the connection is closed (never left hanging).
    const big = await openSocket(app.url);
    try {
      big.write(
        `POST /api/workspaces/any/skills HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n` +
          `Content-Length: ${600 * 1024 * 1024}\r\n\r\n`,
      );
      big.write(Buffer.alloc(64 * 1024, 97));
      const refused = await readResponse(big);
      expect([401, 413]).toContain(refused.status);
      await vi.waitFor(() => expect(big.readableEnded || big.destroyed).toBe(true), { timeout: 10_000 });
    } finally {
      big.destroy();
    }
  });

  it("records the caller's address and user agent on the audit entries services write (agent.create, session.create)", async () => {
    // Under npm start the services that write these entries are the tsx copy's, the request Next's: the
    // address and user agent reached Next's copy only, and every such row had both null.
    const userAgent = `audit-probe/${randomBytes(3).toString("hex")}`;
    const probe = createBerthClient({ url: app.url, apiKey, headers: { "user-agent": userAgent } });
    const agent = await probe.agent.create.mutate({
      name: `audited-${randomBytes(3).toString("hex")}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model" },
    });
    await probe.session.create.mutate({ agentId: agent.id });
    await vi.waitFor(
      async () => {
        const rows = await getDb().auditLog.findMany({
          where: {
            tenantId: tenant.scope.tenantId,
            action: { in: ["agent.create", "session.create"] },
            userAgent,
          },
          select: { action: true, ip: true, userAgent: true },
        });
        expect(rows.map((row) => row.action).sort()).toEqual(["agent.create", "session.create"]);
        for (const row of rows) expect(row.ip).toBe("127.0.0.1");
      },
      { timeout: 30_000, interval: 500 },
    );
  });

  // Last: the sign-in attempts below leave better-auth's per-address window busy for a few seconds.
  it("takes the client address from the socket, not from X-Forwarded-For, for the throttle and the audit log", async () => {
    const email = `victim-${randomBytes(3).toString("hex")}@example.test`;
    const { user } = await auth().api.signUpEmail({
      body: { email, password: "victim-password-1", name: "victim" },
    });
    await addMember(tenant.scope, { userId: user.id, role: "member" }, processBerth().db);
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) {
      const response = await fetch(`${app.url}/api/auth/sign-in/email`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          origin: app.url,
          "x-forwarded-for": `203.0.113.${i + 1}`,
          "user-agent": "spoofer/1.0",
        },
        body: JSON.stringify({ email, password: `guess-${i}` }),
      });
      statuses.push(response.status);
    }
    const refused = statuses.filter((status) => status === 429).length;
    expect(refused).toBeGreaterThanOrEqual(15);
    // The first guess is checked (a wrong password, 401); the earlier tests' sign-ins may already have used
    // part of better-auth's per-address window, so only the first is sure to get through. Nothing else.
    expect(statuses[0]).toBe(401);
    expect(statuses.every((status) => status === 401 || status === 429)).toBe(true);
    // The audit log (flushed by the in-process workers) names the real peer, never a spoofed address.
    await vi.waitFor(
      async () => {
        const rows = (await client.audit.list.query({ limit: 200 })).items.filter(
          (row) => row.action === "auth.sign-in" && row.targetId === user.id,
        );
        expect(rows.length).toBeGreaterThanOrEqual(3);
        for (const row of rows) expect(row).toMatchObject({ ip: "127.0.0.1", userAgent: "spoofer/1.0" });
      },
      { timeout: 30_000, interval: 500 },
    );
  });
});

function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Reads one HTTP/1.1 response (Content-Length or chunked) from a raw socket, within a deadline. */
function readResponse(socket: Socket): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const timer = setTimeout(
      () => finish(new Error(`no complete response: ${buffer.toString().slice(0, 300)}`)),
      15_000,
    );
    const finish = (error: Error | null, value?: { status: number; body: string }) => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("close", onClose);
      if (error) reject(error);
      else resolve(value!);
    };
    const onClose = () => finish(new Error(`connection closed: ${buffer.toString().slice(0, 300)}`));
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const headerEnd = buffer.indexOf("\r\n\r\n");
      if (headerEnd < 0) return;
      const head = buffer.subarray(0, headerEnd).toString();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      const rest = buffer.subarray(headerEnd + 4);
      const length = /content-length:\s*(\d+)/i.exec(head)?.[1];
      if (length !== undefined) {
        if (rest.length >= Number(length))
          finish(null, { status, body: rest.subarray(0, Number(length)).toString() });
      } else if (/transfer-encoding:\s*chunked/i.test(head)) {
        if (rest.includes("0\r\n\r\n")) finish(null, { status, body: rest.toString() });
      } else {
        finish(null, { status, body: rest.toString() });
      }
    };
    socket.on("data", onData);
    socket.once("close", onClose);
  });
}
