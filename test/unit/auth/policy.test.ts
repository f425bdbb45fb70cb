import { describe, expect, it } from "vitest";
import { assertCan, canGrantRole, roleCan, TENANT_ACTIONS, type TenantAction } from "@/server/auth/policy";
import { TENANT_ROLES } from "@/server/auth/roles";
import { actorLabel, mintTenantScope } from "@/server/auth/scope";
import { canTransitionWorkspace, WORKSPACE_STATES } from "@/server/modules/workspace/workspace.types";

const actions = Object.keys(TENANT_ACTIONS) as TenantAction[];

describe("tenant role policy", () => {
  it("viewers may only read", () => {
    const allowed = actions.filter((a) => roleCan("viewer", a));
    expect(allowed.length).toBeGreaterThan(0);
    expect(allowed.every((a) => a.endsWith(":read"))).toBe(true);
    expect(roleCan("viewer", "api-key:read")).toBe(false);
    expect(roleCan("viewer", "audit:read")).toBe(false);
  });

  it("members use agents and sessions but manage nothing", () => {
    expect(roleCan("member", "session:use")).toBe(true);
    expect(roleCan("member", "agent:use")).toBe(true);
    expect(actions.filter((a) => a.endsWith(":manage")).some((a) => roleCan("member", a))).toBe(false);
  });

  it("admins manage agents, keys, members and workspaces but not the tenant; owners do everything", () => {
    for (const a of [
      "agent:manage",
      "api-key:manage",
      "member:manage",
      "workspace:manage",
      "audit:read",
    ] as const) {
      expect(roleCan("admin", a)).toBe(true);
    }
    expect(roleCan("admin", "tenant:manage")).toBe(false);
    expect(actions.every((a) => roleCan("owner", a))).toBe(true);
  });

  it("privileges only grow with rank", () => {
    for (const a of actions) {
      const allowedBy = TENANT_ROLES.map((r) => roleCan(r, a)); // owner, admin, member, viewer
      const firstDenied = allowedBy.indexOf(false);
      if (firstDenied >= 0) expect(allowedBy.slice(firstDenied).every((x) => !x)).toBe(true);
    }
  });

  it("assertCan throws AppError FORBIDDEN", () => {
    const scope = mintTenantScope({ tenantId: "t", userId: "u", apiKeyId: null, role: "viewer" });
    expect(() => assertCan(scope, "agent:manage")).toThrow(
      expect.objectContaining({ name: "AppError", code: "FORBIDDEN" }),
    );
    expect(() => assertCan(scope, "agent:read")).not.toThrow();
  });

  it("nobody grants above their own role; members and viewers grant nothing", () => {
    expect(canGrantRole("owner", "owner")).toBe(true);
    expect(canGrantRole("admin", "admin")).toBe(true);
    expect(canGrantRole("admin", "owner")).toBe(false);
    expect(canGrantRole("member", "viewer")).toBe(false);
    expect(canGrantRole("viewer", "viewer")).toBe(false);
  });

  it("scopes are frozen and label their actor", () => {
    const scope = mintTenantScope({ tenantId: "t", userId: "u", apiKeyId: "k", role: "member" });
    expect(Object.isFrozen(scope)).toBe(true);
    expect(actorLabel(scope)).toBe("api_key:k");
    expect(actorLabel(mintTenantScope({ tenantId: "t", userId: null, apiKeyId: null, role: "owner" }))).toBe(
      "system",
    );
  });
});

describe("workspace transition table", () => {
  it("PURGED only leads to the next generation's PROVISIONING and nothing returns to PENDING", () => {
    for (const to of WORKSPACE_STATES)
      expect(canTransitionWorkspace("PURGED", to)).toBe(to === "PROVISIONING");
    for (const from of WORKSPACE_STATES) expect(canTransitionWorkspace(from, "PENDING")).toBe(false);
  });

  it("a purge always goes through PURGING, which only ends in PURGED", () => {
    for (const from of WORKSPACE_STATES)
      if (from !== "PURGING") expect(canTransitionWorkspace(from, "PURGED")).toBe(false);
    for (const to of WORKSPACE_STATES) expect(canTransitionWorkspace("PURGING", to)).toBe(to === "PURGED");
    for (const from of ["PENDING", "PROVISIONING", "READY", "STOPPING", "STOPPED", "FAILED"] as const)
      expect(canTransitionWorkspace(from, "PURGING")).toBe(true);
  });

  it("follows the main path and allows resume and retry", () => {
    const path = ["PENDING", "PROVISIONING", "READY", "STOPPING", "STOPPED", "PURGING", "PURGED"] as const;
    for (let i = 0; i + 1 < path.length; i++)
      expect(canTransitionWorkspace(path[i]!, path[i + 1]!)).toBe(true);
    expect(canTransitionWorkspace("STOPPED", "PROVISIONING")).toBe(true);
    expect(canTransitionWorkspace("FAILED", "PROVISIONING")).toBe(true);
    expect(canTransitionWorkspace("READY", "PURGED")).toBe(false);
    expect(canTransitionWorkspace("READY", "PROVISIONING")).toBe(false);
  });
});
