import { PassThrough } from "node:stream";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { TunnelSlots } from "@/server/modules/preview/tunnel-slots";
import { isAppError } from "@/server/shared/errors";

describe("preview tunnel slots", () => {
  it("bounds open tunnels per workspace and frees a slot when a tunnel closes or fails to open", async () => {
    const slots = new TunnelSlots(2);
    const first = await slots.hold("ws-a", () => Promise.resolve(new PassThrough()));
    await slots.hold("ws-a", () => Promise.resolve(new PassThrough()));
    // Another workspace has its own bound.
    await slots.hold("ws-b", () => Promise.resolve(new PassThrough()));
    const refused = await slots
      .hold("ws-a", () => Promise.resolve(new PassThrough()))
      .catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe("TOO_MANY_REQUESTS");

    first.destroy();
    await once(first, "close");
    expect(slots.count("ws-a")).toBe(1);
    const failed = await slots
      .hold("ws-a", () => Promise.reject(new Error("nothing listens")))
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(Error);
    expect(slots.count("ws-a")).toBe(1);
    await slots.hold("ws-a", () => Promise.resolve(new PassThrough()));
    expect(slots.count("ws-a")).toBe(2);
  });
});
