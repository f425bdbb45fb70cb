import { describe, expect, it } from "vitest";
import { z } from "zod";
import { describeValidationError } from "@/server/api/error-mapping";
import { findUnsafeString, sanitizeStrings } from "@/server/shared/unsafe-strings";

describe("describeValidationError", () => {
  it("gives one readable line and messages per field", () => {
    const schema = z.strictObject({
      name: z.string().max(100),
      temperature: z.number(),
      tags: z.array(z.string()).min(1),
      kind: z.enum(["a", "b"]),
      url: z.url(),
    });
    const result = schema.safeParse({ name: "n".repeat(101), tags: [], kind: "c", url: "x", extra: 1 });
    const view = describeValidationError(result.error!);
    expect(view.message).toBe(
      'name: must be at most 100 characters; temperature: is required; tags: must not be empty; kind: must be one of "a", "b"; url: must be a valid url; unknown key "extra"',
    );
    expect(view.fieldErrors).toEqual({
      name: ["must be at most 100 characters"],
      temperature: ["is required"],
      tags: ["must not be empty"],
      kind: ['must be one of "a", "b"'],
      url: ["must be a valid url"],
      "(root)": ['unknown key "extra"'],
    });
  });

  it("says 'must not be empty' for a minimum of one and counts in the right number otherwise", () => {
    const schema = z.object({
      name: z.string().min(1),
      code: z.string().max(1),
      slug: z.string().min(3),
      tags: z.array(z.string()).max(1),
    });
    const result = schema.safeParse({ name: "", code: "ab", slug: "a", tags: ["x", "y"] });
    expect(describeValidationError(result.error!).fieldErrors).toEqual({
      name: ["must not be empty"],
      code: ["must be at most 1 character"],
      slug: ["must be at least 3 characters"],
      tags: ["must have at most 1 item"],
    });
  });
});

describe("unstorable strings", () => {
  it("finds a NUL or an unpaired surrogate in values and keys, at any depth up to the bound", () => {
    expect(findUnsafeString({ a: [{ b: "ok" }], c: "fine 😀" })).toBeNull();
    expect(findUnsafeString({ a: [{ b: "x\u0000" }] })).toEqual({ path: "a.0.b", problem: "nul" });
    expect(findUnsafeString({ a: "\uDC00x" })).toEqual({ path: "a", problem: "unpaired-surrogate" });
    expect(findUnsafeString({ ["k\uD800"]: 1 })?.problem).toBe("unpaired-surrogate");
    let deep: unknown = "leaf";
    for (let i = 0; i < 10_000; i += 1) deep = [deep];
    expect(findUnsafeString(deep)?.problem).toBe("too-deep");
  });

  it("sanitises for storage: U+FFFD instead, pairs kept", () => {
    expect(sanitizeStrings({ ["k\u0000"]: ["a\uD800b", "😀"] })).toEqual({ ["k\uFFFD"]: ["a\uFFFDb", "😀"] });
  });
});

describe("host paths in what clients see", () => {
  it("tool error texts name a filesystem error by its kind and redact registered host dirs", async () => {
    const { errorText } = await import("@/server/workspace/tools/types");
    const { registerHostPath } = await import("@/server/shared/host-paths");
    registerHostPath("/srv/berth-host-dir");
    const enoent = Object.assign(
      new Error("ENOENT: no such file or directory, open '/srv/berth-host-dir/t/u/w/x'"),
      {
        code: "ENOENT",
        syscall: "open",
        path: "/srv/berth-host-dir/t/u/w/x",
      },
    );
    expect(errorText(enoent)).toBe("Error: no such file or directory (ENOENT)");
    expect(errorText(new Error("spawn failed in /srv/berth-host-dir/t"))).toBe(
      "Error: spawn failed in <host>/t",
    );
  });
});
