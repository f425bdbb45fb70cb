import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo } from "node:net";
import { Readable } from "node:stream";

export type ServedHandler = { url: string; close: () => Promise<void> };

function toFetchRequest(req: IncomingMessage, origin: string, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  return new Request(new URL(req.url ?? "/", origin), {
    method: req.method,
    headers,
    signal,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: "half" } : {}),
  });
}

/**
 * Serves a Fetch-style handler (the same one the Next route uses) on a real loopback HTTP port,
 * streaming responses so SSE subscriptions work as they do in production.
 */
export async function serveFetchHandler(
  handler: (req: Request) => Promise<Response>,
  /** What the HTTP server does around each request, as npm start's does (serveIncomingRequest). */
  around: (req: IncomingMessage, res: ServerResponse, serve: () => void) => void = (_req, _res, serve) =>
    serve(),
): Promise<ServedHandler> {
  const server: Server = createServer((req, res) => around(req, res, () => serveOne(req, res)));
  const serveOne = (req: IncomingMessage, res: ServerResponse) => {
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    void (async () => {
      try {
        const response = await handler(toFetchRequest(req, `http://${req.headers.host}`, abort.signal));
        res.writeHead(response.status, Object.fromEntries(response.headers));
        if (response.body) for await (const chunk of response.body) res.write(chunk);
        res.end();
      } catch (error) {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(error));
      }
    })();
  };
  return listenOnLoopback(server);
}

/** Listens on an ephemeral loopback port; `close` also drops keep-alive connections. */
export async function listenOnLoopback(server: Server): Promise<ServedHandler> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
