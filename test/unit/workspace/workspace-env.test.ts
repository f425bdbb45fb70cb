import { describe, expect, it } from "vitest";
import {
  sessionCommandEnv,
  storedWorkspaceEnv,
  WORKSPACE_ENV_LIMITS,
  ZWorkspaceEnv,
} from "@/server/workspace/workspace-env";

describe("workspace environment variables", () => {
  it("accept shell names and any value without NUL, up to the limits", () => {
    const env = { GREETING: "hello world", _private: "", A1: "a=b; c", long: "x".repeat(8192) };
    expect(ZWorkspaceEnv.parse(env)).toEqual(env);
    const most = Object.fromEntries(
      Array.from({ length: WORKSPACE_ENV_LIMITS.variables }, (_, i) => [`V${i}`, "x"]),
    );
    expect(ZWorkspaceEnv.safeParse(most).success).toBe(true);
  });

  it.each([
    ["a name the workspace owns", { PATH: "/x" }],
    ["Berth's prefix, in any case", { berth_token: "x" }],
    ["a leading digit", { "1X": "x" }],
    ["a dash", { "A-B": "x" }],
    ["an empty name", { "": "x" }],
    ["a NUL in a value", { OK: "a\0b" }],
    ["a value over 8 KiB", { OK: "x".repeat(8193) }],
    ["65 variables", Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "x"]))],
  ])("refuse %s", (_, env) => {
    expect(ZWorkspaceEnv.safeParse(env).success).toBe(false);
  });

  it("never turn __proto__ into a variable or a prototype", () => {
    const hostile = JSON.parse('{"__proto__": {"polluted": "x"}, "A": "1"}') as Record<string, string>;
    // zod leaves the key out of a record rather than set a prototype with it.
    const parsed = ZWorkspaceEnv.parse(hostile);
    expect(Object.keys(parsed)).toEqual(["A"]);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    const stored = storedWorkspaceEnv(hostile);
    expect(Object.keys(stored)).toEqual(["A"]);
    expect((stored as { polluted?: string }).polluted).toBeUndefined();
  });

  it("read back from storage: what still parses, in name order; anything else is empty", () => {
    expect(Object.keys(storedWorkspaceEnv({ B: "2", A: "1", PATH: "/x", C: 3, D: "ok" }))).toEqual([
      "A",
      "B",
      "D",
    ]);
    for (const junk of [null, "text", ["A"], 7]) expect(storedWorkspaceEnv(junk)).toEqual({});
  });

  it("a session's variables override its agent's of the same name", () => {
    expect(sessionCommandEnv({ A: "agent", B: "agent" }, { B: "session", C: "session" })).toEqual({
      A: "agent",
      B: "session",
      C: "session",
    });
  });
});
