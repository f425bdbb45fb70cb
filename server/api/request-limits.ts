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
 * first byte past the limit, so nothing larger than the limit is ever held in memory.
 */
export function limitRequestBody(req: Request, maxBytes: number, tooLarge: () => Error): Request {
  const body = req.body;
  if (body === null) return req;
  const declared = Number(req.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    // Not read at all: cancelling ends the upload instead of leaving it half-read on the connection.
    void body.cancel().catch(() => undefined);
    return withBody(req, errorStream(tooLarge()));
  }
  let seen = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      // Erroring the transform also cancels the source (pipeThrough), ending the upload.
      if (seen > maxBytes) return controller.error(tooLarge());
      controller.enqueue(chunk);
    },
  });
  return withBody(req, body.pipeThrough(counter));
}

function errorStream(error: Error): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (controller) => controller.error(error) });
}

function withBody(req: Request, body: ReadableStream<Uint8Array>): Request {
  return new Request(req, { body, duplex: "half" } as RequestInit);
}
