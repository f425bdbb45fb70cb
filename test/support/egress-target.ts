import http from "node:http";
import type { AddressInfo } from "node:net";

/** A loopback HTTP server on the HOST that records what reached it (the egress tests' destination). */
export async function startEgressTarget() {
  const received: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    received.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    req.resume();
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`hello from the host (${req.url})\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
