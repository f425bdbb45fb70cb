import { describe, expect, it } from "vitest";
import { safePathSegment } from "@/server/workspace/drivers/host-folder/folder-layout";
import {
  assignWorkspaceId,
  IsolationPolicy,
  legacyPerUserWorkspaceId,
} from "@/server/workspace/manager/isolation";

describe("assignWorkspaceId", () => {
  // agentscope-spec.md §8.1, computed with CPython's hashlib.blake2b(digest_size=8).
  it.each([
    ["u1", "a1", "4bf1218b645ff727", "48ea3da4179df93b"],
    ["alice", "agent-42", "96912ff9eba0c95c", "982aa9b33217069a"],
    ["", "a1", "19f69055a5066d5f", "db411675917f437a"],
  ])("reproduces the reference vectors for user %j agent %j", (userId, agentId, perAgent, perUser) => {
    // PER_AGENT ids are the reference's whatever the tenant (existing bindings stay valid).
    expect(assignWorkspaceId(IsolationPolicy.PER_AGENT, { tenantId: "t1", userId, agentId })).toBe(perAgent);
    expect(assignWorkspaceId(IsolationPolicy.PER_AGENT, { tenantId: "t2", userId, agentId })).toBe(perAgent);
    // The reference's PER_USER id, still found for bindings made before the tenant was part of it.
    expect(legacyPerUserWorkspaceId(userId)).toBe(perUser);
  });

  it("derives PER_USER ids per tenant: the same user gets a different workspace in each tenant", () => {
    const inT1 = assignWorkspaceId(IsolationPolicy.PER_USER, { tenantId: "t1", userId: "u1", agentId: "a" });
    const inT2 = assignWorkspaceId(IsolationPolicy.PER_USER, { tenantId: "t2", userId: "u1", agentId: "a" });
    expect(inT1).toMatch(/^[0-9a-f]{16}$/);
    expect(inT1).not.toBe(inT2);
    expect(inT1).not.toBe(legacyPerUserWorkspaceId("u1"));
  });

  it("ignores the session id and is pure for PER_AGENT and PER_USER", () => {
    const a = assignWorkspaceId(IsolationPolicy.PER_AGENT, {
      tenantId: "t",
      userId: "u",
      agentId: "a",
      sessionId: "s1",
    });
    const b = assignWorkspaceId(IsolationPolicy.PER_AGENT, {
      tenantId: "t",
      userId: "u",
      agentId: "a",
      sessionId: "s2",
    });
    expect(a).toBe(b);
    expect(assignWorkspaceId(IsolationPolicy.PER_USER, { tenantId: "t", userId: "u", agentId: "x" })).toBe(
      assignWorkspaceId(IsolationPolicy.PER_USER, { tenantId: "t", userId: "u", agentId: "y" }),
    );
  });

  it("mints a fresh 32-hex id per call for PER_SESSION", () => {
    const ids = new Set(
      Array.from({ length: 100 }, () =>
        assignWorkspaceId(IsolationPolicy.PER_SESSION, { tenantId: "t", userId: "u", agentId: "a" }),
      ),
    );
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe("safePathSegment", () => {
  it("keeps plain ids and encodes everything else without collisions", () => {
    expect(safePathSegment("tenant_1-a")).toBe("tenant_1-a");
    expect(safePathSegment("..")).toBe("%2E%2E");
    expect(safePathSegment("a/b")).toBe("a%2Fb");
    expect(safePathSegment("")).toBe("%");
    expect(safePathSegment("ü")).toBe("%C3%BC");
    const inputs = ["a/b", "a%2Fb", "a.b", "a%2Eb", "", "%", "x".repeat(300), "x".repeat(301)];
    const outputs = inputs.map(safePathSegment);
    expect(new Set(outputs).size).toBe(inputs.length);
    for (const out of outputs) {
      expect(out).not.toMatch(/[/\\\0]/);
      expect(out === "." || out === "..").toBe(false);
      expect(out.length).toBeLessThanOrEqual(120);
    }
  });
});
