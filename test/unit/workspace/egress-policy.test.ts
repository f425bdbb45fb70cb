import { describe, expect, it } from "vitest";
import {
  checkAddresses,
  checkHost,
  effectiveEgressPolicy,
  hostMatches,
  ZEgressPolicy,
} from "@/server/workspace/egress/egress-policy";
import { rewriteHeaders } from "@/server/workspace/egress/egress-secrets";

const allow = (rules: Array<{ host: string; ports?: number[] }>) =>
  ZEgressPolicy.parse({ mode: "allowlist", allow: rules });

describe("egress policy", () => {
  it("matches names exactly and *. patterns below the suffix only", () => {
    expect(hostMatches("api.github.com", "API.github.com.")).toBe(true);
    expect(hostMatches("*.github.com", "api.github.com")).toBe(true);
    expect(hostMatches("*.github.com", "github.com")).toBe(false);
    expect(hostMatches("*.github.com", "evilgithub.com")).toBe(false);
  });

  it("refuses everything when off, any host when open, listed hosts and ports for an allow-list", () => {
    expect(checkHost({ mode: "off", allow: [] }, "example.com", 80)).toMatchObject({ reason: "egress_off" });
    expect(checkHost({ mode: "open", allow: [] }, "example.com", 80).allowed).toBe(true);
    const policy = allow([{ host: "*.example.com", ports: [443] }, { host: "10.0.0.0/8" }]);
    expect(checkHost(policy, "a.example.com", 443).allowed).toBe(true);
    expect(checkHost(policy, "a.example.com", 80)).toMatchObject({ reason: "host_not_allowed" });
    expect(checkHost(policy, "10.1.2.3", 5432).allowed).toBe(true);
    expect(checkHost(policy, "11.1.2.3", 5432).allowed).toBe(false);
  });

  it("refuses non-public addresses unless an address rule lists them (a listed name is not enough)", () => {
    const policy = allow([{ host: "internal.example.com" }, { host: "127.0.0.1", ports: [8080] }]);
    expect(checkAddresses(policy, "internal.example.com", 80, ["10.0.0.5"])).toMatchObject({
      reason: "address_not_public",
    });
    expect(checkAddresses(policy, "internal.example.com", 80, ["93.184.216.34"]).allowed).toBe(true);
    expect(checkAddresses(policy, "x", 8080, ["::ffff:127.0.0.1"]).allowed).toBe(true);
    expect(checkAddresses(policy, "x", 8081, ["127.0.0.1"]).allowed).toBe(false);
    expect(checkAddresses({ mode: "open", allow: [] }, "x", 80, ["169.254.169.254"]).allowed).toBe(false);
  });

  it("lets an agent's policy replace the tenant's; off without either; refuses bad rules", () => {
    const tenant = allow([{ host: "example.com" }]);
    expect(effectiveEgressPolicy(null, null).mode).toBe("off");
    expect(effectiveEgressPolicy(tenant, null)).toBe(tenant);
    expect(effectiveEgressPolicy(tenant, { mode: "off", allow: [] }).mode).toBe("off");
    expect(ZEgressPolicy.safeParse({ mode: "allowlist", allow: [{ host: "bad host" }] }).success).toBe(false);
    expect(ZEgressPolicy.safeParse({ mode: "allowlist", allow: [{ host: "10.0.0.0/33" }] }).success).toBe(
      false,
    );
  });
});

describe("secret placeholders in headers", () => {
  const secrets = [{ name: "gh", value: "VALUE", hosts: ["api.github.com", "*.example.com"] }];

  it("puts the value in toward a bound host", () => {
    const out = rewriteHeaders(
      { authorization: "token berth-secret://gh", "x-a": ["berth-secret://gh"] },
      secrets,
      "api.github.com",
    );
    expect(out).toMatchObject({ headers: { authorization: "token VALUE", "x-a": ["VALUE"] }, used: ["gh"] });
  });

  it("refuses an unbound host or an unknown name, naming the placeholder only", () => {
    expect(rewriteHeaders({ authorization: "berth-secret://gh" }, secrets, "evil.com")).toMatchObject({
      verdict: { reason: "secret_host_not_bound" },
      names: ["gh"],
    });
    expect(rewriteHeaders({ authorization: "berth-secret://nope" }, secrets, "api.github.com")).toMatchObject(
      {
        verdict: { reason: "unknown_secret" },
        names: ["nope"],
      },
    );
  });
});
