/**
 * Request bounds of the tRPC endpoint. The largest legitimate body is a chat message (200,000 characters,
 * up to ~1.2 MB as escaped JSON); a body over the limit is refused while it streams (413), never buffered
 * whole. A batch carries at most `maxBatchSize` calls (the typed client splits larger ones).
 */
export const TRPC_REQUEST_LIMITS = { maxBodyBytes: 2 * 1024 * 1024, maxBatchSize: 20 } as const;

export type TrpcRequestLimits = { maxBodyBytes: number; maxBatchSize: number };

/**
 * Body bounds for Fetch-style handlers. The count happens while the body streams: a body that announces
 * (Content-Length) or turns out to be larger than the limit fails its reader with the caller's error at the
 * first byte past the limit, so nothing larger than the limit is ever held in memory. `refused()` says
 * whether that happened: the rest of that body is still on the connection, so the answer must close it
 * (`closeConnectionIfRefused`) or the next request on a kept-alive connection would read garbage.
 */
export function limitRequestBody(
  req: Request,
  maxBytes: number,
  tooLarge: () => Error,
): { request: Request; refused: () => boolean } {
  const body = req.body;
  if (body === null) return { request: req, refused: () => false };
  let refused = false;
  const declared = Number(req.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    refused = true;
    return { request: withBody(req, errorStream(tooLarge())), refused: () => refused };
  }
  let seen = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > maxBytes) {
        refused = true;
        return controller.error(tooLarge());
      }
      controller.enqueue(chunk);
    },
  });
  // The source is left alone on a refusal (not cancelled): cancelling would reset the socket before the
  // 413 is written. The connection is closed after the answer instead.
  return {
    request: withBody(req, body.pipeThrough(counter, { preventCancel: true })),
    refused: () => refused,
  };
}

/** The response with `Connection: close` when the request's body was refused part-way. */
export function closeConnectionIfRefused(response: Response, refused: boolean): Response {
  if (!refused) return response;
  const headers = new Headers(response.headers);
  headers.set("connection", "close");
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

function errorStream(error: Error): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (controller) => controller.error(error) });
}

function withBody(req: Request, body: ReadableStream<Uint8Array>): Request {
  return new Request(req, { body, duplex: "half" } as RequestInit);
}
