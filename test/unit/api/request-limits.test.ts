import { describe, expect, it } from "vitest";
import { closeConnectionIfRefused, limitRequestBody } from "@/server/api/request-limits";

class TooLarge extends Error {}

/** An endless upload that counts what the reader pulled from it. */
function endlessBody(chunkBytes: number) {
  const pulled = { bytes: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled.bytes += chunkBytes;
      controller.enqueue(new Uint8Array(chunkBytes));
    },
  });
  return { stream, pulled };
}

const post = (body: BodyInit, headers: Record<string, string> = {}) =>
  new Request("http://berth.test/api/trpc/x", {
    method: "POST",
    body,
    headers,
    duplex: "half",
  } as RequestInit);

describe("limitRequestBody", () => {
  it("fails an endless body at the limit while it streams, having read only about the limit", async () => {
    const { stream, pulled } = endlessBody(16 * 1024);
    const limited = limitRequestBody(post(stream), 256 * 1024, () => new TooLarge());
    await expect(limited.request.text()).rejects.toBeInstanceOf(TooLarge);
    expect(limited.refused()).toBe(true);
    // The limit plus what the streams' queues hold ahead of the reader: never "everything".
    expect(pulled.bytes).toBeLessThan(256 * 1024 + 8 * 16 * 1024);
  });

  it("refuses a body whose Content-Length is over the limit without reading it", async () => {
    const { stream, pulled } = endlessBody(1024);
    const limited = limitRequestBody(
      post(stream, { "content-length": "999999" }),
      1000,
      () => new TooLarge(),
    );
    await expect(limited.request.text()).rejects.toBeInstanceOf(TooLarge);
    expect(pulled.bytes).toBeLessThanOrEqual(1024);
  });

  it("passes a body within the limit through unchanged", async () => {
    const limited = limitRequestBody(post('{"json":{"a":1}}'), 1000, () => new TooLarge());
    expect(await limited.request.json()).toEqual({ json: { a: 1 } });
    expect(limited.refused()).toBe(false);
    const response = closeConnectionIfRefused(new Response("ok"), limited.refused());
    expect(response.headers.get("connection")).toBeNull();
    expect(closeConnectionIfRefused(new Response("x"), true).headers.get("connection")).toBe("close");
  });
});
