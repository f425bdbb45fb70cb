import { createServer, type Server } from "node:http";
import type { Logger } from "@/server/logger";

/**
 * The worker process's own probes: `/live` is 200 while the process serves HTTP at all; `/ready` is 200
 * only while workers are running and turns 503 as soon as shutdown begins (so an orchestrator stops
 * routing to, and stops waiting on, a draining worker).
 */
export async function startHealthServer(params: {
  port: number;
  host?: string;
  isReady: () => boolean;
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
      const ready = params.isReady();
      return respond(ready ? 200 : 503, { status: ready ? "ready" : "not ready" });
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
