/**
 * Preview URLs end to end on the confined `local` (bubblewrap) backend: a real workspace provisioned by
 * in-process workers, a tiny HTTP + WebSocket app started inside it by the workspace's own exec, and Berth's
 * preview relay (server/api/preview-proxy.ts) on a real HTTP server routed as npm start's server routes it
 * (scripts/berth-process.ts; Next is left out, it never sees /p/). Auth by session cookie and share link,
 * refusals, header hygiene, WebSocket echo, and the idle clock left alone.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { parseTrustedProxies } from "@/server/api/client-address";
import { createPreviewProxy, isPreviewUrl } from "@/server/api/preview-proxy";
import { buildApiProcess } from "@/server/composition/berth";
import { processBerth } from "@/server/composition/process-berth";
import { previewShareKey, signPreviewToken } from "@/server/modules/preview/preview-token";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { serveIncomingRequest } from "@/scripts/services/incoming-request";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { provisionReadyLocalWorkspace } from "../workspace/provision-ready";
import { PREVIEW_APP } from "./preview-server";

// Previews have an origin of their own (the config refuses the dashboard's): set before this file's root
// is built. The relay under test is served on a server of the test's; the origin is what links and the
// upgrade check use.
const PREVIEW_PORT = 3999;
process.env.BERTH_PREVIEW_PORT = String(PREVIEW_PORT);
const PREVIEW_ORIGIN = `http://localhost:${PREVIEW_PORT}`;

const APP_PORT = 18_000 + Math.floor(Math.random() * 1000);
const IDLE_PORT = APP_PORT + 1;

describe.skipIf(process.getuid?.() !== 0)("preview URLs on the local backend", { timeout: 120_000 }, () => {
  let workers: WorkerRuntime;
  let server: Server;
  let base: string;
  let a: TenantFixture;
  let b: TenantFixture;
  let workspaceId: string;
  const app = new AbortController();

  beforeAll(async () => {
    const berth = processBerth();
    buildApiProcess(berth);
    workers = await startWorkerRuntime({
      berth,
      redis: berth.config.redis,
      workers: berth.config.workers,
      log: berth.log,
      healthPort: null,
      schedules: [],
    });
    const runtime = { auth: berth.api.auth } as Parameters<typeof createTenantFixture>[0];
    [a, b] = await Promise.all([createTenantFixture(runtime, "pva"), createTenantFixture(runtime, "pvb")]);
    workspaceId = await provisionReadyLocalWorkspace(
      a.ownerScope,
      `ws-preview-${a.tenant.slug}`,
      "test: previews",
    );

    const proxy = createPreviewProxy(berth);
    const proxies = parseTrustedProxies([]);
    server = createServer((req, res) =>
      serveIncomingRequest(req, res, proxies, () =>
        isPreviewUrl(req.url) ? proxy.handleRequest(req, res) : void res.writeHead(404).end(),
      ),
    );
    server.on("upgrade", (req, socket, head: Buffer) => {
      if (isPreviewUrl(req.url)) proxy.handleUpgrade(req, socket, head);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    // The app runs as a command of the workspace (no lease: the test holds the attached machine itself).
    const record = await getWorkspace(a.ownerScope, workspaceId, processBerth().db);
    const workspace = await berth.workspaces.service.attach(a.ownerScope, record);
    await new Promise<void>((resolve, reject) => {
      workspace.machine
        .exec(["node", "-e", PREVIEW_APP, String(APP_PORT)], {
          signal: app.signal,
          onStdout: (chunk) => chunk.toString().includes("listening") && resolve(),
        })
        .then((result) => reject(new Error(`the app exited: ${result.stderr.toString()}`)), reject);
    });
    await berth.workspaces.previews.expose(a.ownerScope, workspaceId, APP_PORT);
  }, 300_000);

  afterAll(async () => {
    app.abort();
    server?.close();
    server?.closeAllConnections();
    await workers?.stop();
  });

  const previewUrl = (port = APP_PORT, rest = "") => `${base}/p/${workspaceId}/${port}/${rest}`;
  /** An idle clock an hour old: any bump by the preview path (whose granularity is 1 s) would show. */
  const ageActivity = async () => {
    const past = new Date(Date.now() - 3_600_000);
    await processBerth().db.workspace.update({ where: { id: workspaceId }, data: { lastActivityAt: past } });
    return past;
  };
  const get = (url: string, headers: Record<string, string> = {}) =>
    fetch(url, { headers, redirect: "manual" });

  it("answers a member's session: the app sees its own path and Host, none of Berth's cookies", async () => {
    const before = await ageActivity();
    const res = await get(previewUrl(APP_PORT, "hello?x=1"), { cookie: `${a.owner.cookie}; theme=dark` });
    expect(res.status).toBe(200);
    const seen = (await res.json()) as Record<string, string>;
    expect(seen.path).toBe("/hello?x=1");
    expect(seen.host).toBe(`127.0.0.1:${APP_PORT}`);
    expect(seen.prefix).toBe(`/p/${workspaceId}/${APP_PORT}`);
    expect(seen.cookie).toBe("theme=dark");
    // The app may set its own cookies, never one that would replace Berth's session.
    expect(res.headers.getSetCookie()).toEqual(["app=1; Path=/"]);
    // Passive: the idle sweep's clock did not move.
    expect((await getWorkspace(a.ownerScope, workspaceId, processBerth().db)).lastActivityAt).toEqual(before);
  });

  it("refuses without credentials (401; a browser goes to sign-in) and hides other tenants' workspaces (404)", async () => {
    expect((await get(previewUrl())).status).toBe(401);
    const browser = await get(previewUrl(), { accept: "text/html" });
    expect(browser.status).toBe(303);
    expect(browser.headers.get("location")).toMatch(/^\/sign-in\?next=/);
    expect((await get(previewUrl(), { cookie: b.owner.cookie })).status).toBe(404);
    expect((await get(`${base}/p/no-such-workspace/${APP_PORT}/`, { cookie: a.owner.cookie })).status).toBe(
      404,
    );
  });

  it("refuses a port nobody exposed (404) and says so when nothing listens on an exposed one (502)", async () => {
    expect((await get(previewUrl(IDLE_PORT), { cookie: a.owner.cookie })).status).toBe(404);
    await processBerth().workspaces.previews.expose(a.ownerScope, workspaceId, IDLE_PORT);
    const res = await get(previewUrl(IDLE_PORT), { cookie: a.owner.cookie });
    expect(res.status).toBe(502);
    expect(await res.text()).toContain(`Nothing is listening on port ${IDLE_PORT}`);
  });

  it("a share link sets a path-scoped cookie, drops the token from the URL and works until revoked", async () => {
    const previews = processBerth().workspaces.previews;
    const { url } = await previews.shareLink(a.ownerScope, workspaceId, APP_PORT, 60_000);
    const link = new URL(url);
    const first = await get(`${base}${link.pathname}page${link.search}&q=2`);
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe(`/p/${workspaceId}/${APP_PORT}/page?q=2`);
    const cookie = first.headers.getSetCookie()[0]!;
    expect(cookie).toContain(`Path=/p/${workspaceId}/${APP_PORT}/`);
    expect(cookie).toContain("HttpOnly");
    const shareCookie = cookie.split(";")[0]!;
    const res = await get(`${base}${first.headers.get("location")}`, { cookie: shareCookie });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { cookie: string }).cookie).toBe("");

    const token = link.searchParams.get("berth_share")!;
    const tampered = `${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}`;
    expect((await get(`${previewUrl()}?berth_share=${tampered}`)).status).toBe(401);
    const key = previewShareKey(processBerth().config.secrets.authSecret);
    const expired = signPreviewToken(key, { workspaceId, port: APP_PORT }, new Date(Date.now() - 1000));
    expect((await get(`${previewUrl()}?berth_share=${expired}`)).status).toBe(401);
    // Another port's link does not open this one.
    const other = signPreviewToken(key, { workspaceId, port: IDLE_PORT }, new Date(Date.now() + 60_000));
    expect((await get(`${previewUrl()}?berth_share=${other}`)).status).toBe(401);

    await previews.unexpose(a.ownerScope, workspaceId, APP_PORT);
    try {
      expect((await get(previewUrl(), { cookie: shareCookie })).status).toBe(404);
    } finally {
      await previews.expose(a.ownerScope, workspaceId, APP_PORT);
    }
  });

  it("relays a WebSocket (same-origin, the member's session) and leaves the idle clock alone", async () => {
    const before = await ageActivity();
    const ws = new WebSocket(previewUrl(APP_PORT, "socket").replace("http", "ws"), {
      headers: { cookie: a.owner.cookie, origin: PREVIEW_ORIGIN },
    });
    const echoed = await new Promise<string>((resolve, reject) => {
      ws.once("open", () => ws.send("ping"));
      ws.once("message", (data: Buffer) => resolve(data.toString()));
      ws.once("error", reject);
    });
    ws.terminate();
    expect(echoed).toBe("echo:ping");
    // Cross-site upgrade with the cookie: refused.
    const crossSite = await new Promise<number>((resolve) => {
      const probe = new WebSocket(previewUrl().replace("http", "ws"), {
        headers: { cookie: a.owner.cookie, origin: "https://evil.example" },
      });
      probe.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      probe.once("error", () => undefined);
    });
    expect(crossSite).toBe(403);
    expect((await getWorkspace(a.ownerScope, workspaceId, processBerth().db)).lastActivityAt).toEqual(before);
    // The check can see a bump: a leased call (work) moves the same clock.
    await processBerth().workspaces.service.withWorkspace(a.ownerScope, workspaceId, "test: work", () =>
      Promise.resolve(),
    );
    expect(
      (await getWorkspace(a.ownerScope, workspaceId, processBerth().db)).lastActivityAt!.getTime(),
    ).toBeGreaterThan(before.getTime());
  });
});
