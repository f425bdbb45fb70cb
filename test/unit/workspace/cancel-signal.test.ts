import { describe, expect, it, vi } from "vitest";
import { CancelSource, toAbortSignal } from "@/server/workspace/mcp/cancel-signal";

describe("CancelSource", () => {
  it("runs each listener once on the first abort, not removed ones, and keeps the first reason", () => {
    const source = new CancelSource();
    const kept = vi.fn();
    const removed = vi.fn();
    source.addEventListener("abort", kept);
    source.addEventListener("abort", removed);
    source.removeEventListener("abort", removed);
    source.abort("first");
    source.abort("second");
    expect(kept).toHaveBeenCalledTimes(1);
    expect(removed).not.toHaveBeenCalled();
    expect(source).toMatchObject({ aborted: true, reason: "first" });
  });

  it("aborts with an AbortError by default, as AbortController does", () => {
    const source = new CancelSource();
    source.abort();
    expect(source.reason).toBeInstanceOf(DOMException);
    expect((source.reason as DOMException).name).toBe("AbortError");
  });

  it("becomes an AbortSignal that follows it; an AbortSignal stays itself", () => {
    const source = new CancelSource();
    const signal = toAbortSignal(source);
    expect(signal.aborted).toBe(false);
    source.abort("gone");
    expect(signal).toMatchObject({ aborted: true, reason: "gone" });

    const early = new CancelSource();
    early.abort("before");
    expect(toAbortSignal(early)).toMatchObject({ aborted: true, reason: "before" });

    const native = new AbortController().signal;
    expect(toAbortSignal(native)).toBe(native);
  });
});
