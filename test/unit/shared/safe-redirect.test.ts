import { describe, expect, it } from "vitest";
import { safeNextPath } from "@/server/shared/safe-redirect";

describe("safeNextPath (where sign-in may redirect)", () => {
  it("keeps same-origin paths with their query and fragment", () => {
    expect(safeNextPath("/t/acme/agents?tab=1#top")).toBe("/t/acme/agents?tab=1#top");
    expect(safeNextPath("/")).toBe("/");
  });

  it("refuses every form browsers read as another host", () => {
    for (const hostile of [
      "https://evil.example",
      "//evil.example",
      "/\\evil.example",
      "\\/evil.example",
      "/\t/evil.example",
      "/\n/evil.example",
      "/%09/evil.example".replace("%09", "\t"),
      " /evil.example",
      "/\u0000/evil.example",
      "javascript:alert(1)",
      "evil.example",
      "/..//evil.example",
    ]) {
      expect(safeNextPath(hostile), JSON.stringify(hostile)).toBe("/");
    }
    expect(safeNextPath(["/a", "/b"])).toBe("/");
    expect(safeNextPath(undefined)).toBe("/");
  });

  it("keeps an encoded tab inside a path segment as text, never as a second slash", () => {
    // `?next=/%2509/x` arrives as "/%09/x": a literal percent sequence, still this origin.
    expect(safeNextPath("/%09/evil.example")).toBe("/%09/evil.example");
    expect(new URL(safeNextPath("/%09/evil.example"), "http://berth.test").host).toBe("berth.test");
  });
});
