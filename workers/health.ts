import { createServer, type Server } from "node:http";
import type { Logger } from "@/server/logger";

/** What `/ready` answers: ready or not, and why not (ids of missing schedules, …; no error texts). */
export type Readiness = { ready: boolean; detail?: Record<string, unknown> };

/**
 * The worker process's own probes: `/live` is 200 while the process serves HTTP at all; `/ready` is 200
 * only while workers are running and their schedules exist in Redis, and turns 503 as soon as shutdown
 * begins (so an orchestrator stops routing to, and stops waiting on, a draining worker). It listens before
 * the workers start, so a port clash fails the process before it takes a job.
 */
export async function startHealthServer(params: {
  port: number;
  host?: string;
  readiness: () => Readiness | Promise<Readiness>;
  log: Logger;
}): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const respond = (status: number, body: object) => {
      res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify(body));
    };
    if (path === "/live") return respond(200, { status: "live" });
    if (path === "/ready") {
      void Promise.resolve()
        .then(() => params.readiness())
        .catch((): Readiness => ({ ready: false, detail: { error: "check failed" } }))
        .then(({ ready, detail }) =>
          respond(ready ? 200 : 503, { status: ready ? "ready" : "not ready", ...detail }),
        );
      return;
    }
    respond(404, { error: "not found" });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(params.port, params.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : params.port;
  params.log.info({ port }, "worker health endpoint listening");
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive connections of probes would otherwise hold the port until they time out.
        server.closeAllConnections();
      }),
  };
}
