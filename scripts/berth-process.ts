/**
 * The server half of `npm start`, imported by scripts/start.ts once the environment is complete. It builds
 * the process' Berth (`createBerth`: config, logger, database, Redis, queues, engine, services, auth) up
 * front and installs it as the process' one root before Next loads, so the copy of the server modules
 * inside Next's production bundle reaches this root and never builds its own (server/shared/process-root.ts).
 * Everything shutdown needs is imported here, statically: at Ctrl-C tsx's esbuild service receives the
 * terminal's SIGINT too and dies, so nothing may be loaded through tsx once a signal arrived.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import next from "next";
import { parseTrustedProxies, resolveClientAddress, type TrustedProxies } from "@/server/api/client-address";
import { type Berth, buildApiProcess, createBerth } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";
import type { Logger } from "@/server/logger";
import { bootstrapFirstTenant, type BootstrapResult } from "@/server/modules/bootstrap/bootstrap.service";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { serveTerminalUpgrades } from "@/server/api/terminal-socket";
import { createPreviewProxy, isPreviewUrl } from "@/server/api/preview-proxy";
import { serveIncomingRequest } from "./services/incoming-request";

export type BerthProcess = {
  readonly url: string;
  readonly log: Logger;
  readonly bootstrap: BootstrapResult;
  /** Serving without workers of its own (BERTH_API_ONLY): jobs wait for `npm run workers`. */
  readonly apiOnly: boolean;
  /**
   * Graceful: stop accepting requests → let jobs in flight finish → close every cached workspace (MCP
   * children, gateway connections) → close queues, Redis and the database pool → drop open connections.
   */
  close(): Promise<void>;
};

export async function startBerthProcess(options: {
  repoRoot: string;
  adminEmail: string;
  /** Runs `next build` when needed, before Next loads the build. */
  ensureBuild: () => Promise<void>;
  /**
   * `npm run dev` (scripts/dev.ts): Next's development server (Turbopack, compiled on demand, hot reload
   * over its own WebSocket) and no workers in this process (`npm run workers` runs them, restartable on
   * their own). Default: production, workers in-process (`npm start`) unless BERTH_API_ONLY.
   */
  development?: boolean;
}): Promise<BerthProcess> {
  const berth = installProcessBerth(createBerth(loadConfig()));
  const { config } = berth;
  const log = berth.log.child({ process: "start" });
  // Everything built here, before Next serves a request (a failure fails the start, not a first request).
  buildApiProcess(berth);

  const bootstrap = await bootstrapFirstTenant(berth.api.auth, { email: options.adminEmail }, berth.db);
  await options.ensureBuild();

  const development = options.development ?? false;
  const app = next({
    dev: development,
    ...(development ? { turbopack: true } : {}),
    dir: options.repoRoot,
    hostname: config.http.host,
    port: config.http.port,
  });
  const handle = app.getRequestHandler();
  await app.prepare();
  // Client address from trusted proxies only; unread upload bodies drained or the connection closed.
  const trustedProxies = parseTrustedProxies(config.http.trustedProxies);
  // Every audit entry written while a request is served names its caller (address, user agent).
  const server = createServer((req, res) => {
    serveIncomingRequest(req, res, trustedProxies, () => void handle(req, res));
  });
  // The dashboard terminal's WebSocket (server/api/terminal-socket.ts). In production Next serves no
  // upgrades; the development server listens for its hot reload's on this server itself.
  server.on("upgrade", (req) => resolveUpgradeClient(req, trustedProxies));
  serveTerminalUpgrades(berth, server, { othersBelongToNext: development });
  await listen(server, config.http.port, config.http.host);
  // Preview URLs (/p/<workspace>/<port>/…), relayed into workspaces on an origin of their own (a second
  // listener), never the dashboard's: an app's scripts must not run where Berth's API trusts the session.
  const previewServer = config.http.preview ? createPreviewServer(berth, trustedProxies) : null;
  if (previewServer && config.http.preview)
    await listen(previewServer, config.http.preview.port, config.http.host);

  // In development and API-only mode (BERTH_API_ONLY) the workers run apart: `npm run workers`.
  const workers =
    development || config.apiOnly
      ? null
      : await startWorkerRuntime({
          berth,
          redis: config.redis,
          workers: config.workers,
          log,
          healthPort: null, // /api/health reports the workers of this process through their heartbeat
        });
  return {
    url: config.http.baseUrl,
    log,
    bootstrap,
    apiOnly: !development && config.apiOnly,
    close: async () => {
      if (previewServer) await closePreviewServer(previewServer);
      await closeBerthProcess(server, workers);
    },
  };
}

async function closeBerthProcess(server: Server, workers: WorkerRuntime | null): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await workers?.stop();
  await closeProcessBerth();
  // Long-lived requests (SSE subscriptions) would hold close() open forever.
  server.closeAllConnections();
  await closed;
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
}

/** An upgrade's client address from trusted proxies only (as serveIncomingRequest does for requests). */
function resolveUpgradeClient(req: IncomingMessage, trustedProxies: TrustedProxies): void {
  const client = resolveClientAddress(
    req.socket.remoteAddress,
    req.headers["x-forwarded-for"],
    trustedProxies,
  );
  if (client) req.headers["x-forwarded-for"] = client;
  else delete req.headers["x-forwarded-for"];
}

/** The preview origin's server: /p/ requests and upgrades, nothing else (no dashboard, no API). */
function createPreviewServer(berth: Berth, trustedProxies: TrustedProxies): Server {
  const previews = createPreviewProxy(berth);
  const server = createServer((req, res) => {
    serveIncomingRequest(req, res, trustedProxies, () =>
      isPreviewUrl(req.url)
        ? previews.handleRequest(req, res)
        : void res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("Not a preview.\n"),
    );
  });
  server.on("upgrade", (req, socket, head: Buffer) => {
    resolveUpgradeClient(req, trustedProxies);
    if (isPreviewUrl(req.url)) previews.handleUpgrade(req, socket, head);
    else socket.destroy();
  });
  return server;
}

async function closePreviewServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}
