import { BlockList, isIP } from "node:net";
import { z } from "zod";
import { isPublicAddress } from "@/server/workspace/mcp/mcp-network-policy";

/**
 * A workspace's egress policy (issue 25): where its commands may connect through Berth's egress proxy.
 *
 * - `off` (the default): no proxy, no route; commands have no network at all, as before.
 * - `allowlist`: only the hosts of `allow` (a name, `*.` + a suffix, an IP address or a CIDR subnet, each
 *   with optional ports).
 * - `open`: any host.
 *
 * In both non-`off` modes every address a name resolves to must be public, unless a rule names that
 * address or its subnet explicitly (an IP or CIDR rule): a listed NAME that resolves to 127.0.0.1 is refused,
 * so neither DNS rebinding nor a friendly-looking name reaches the host's own ports or the office network.
 */
const HOST_NAME = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export const ZEgressRule = z.object({
  host: z
    .string()
    .trim()
    .toLowerCase()
    .min(1)
    .max(253)
    .refine(isRuleHost, "a host name, *.suffix, an IP address or a CIDR subnet (10.0.0.0/8)"),
  /** Absent or empty: every port. */
  ports: z.array(z.number().int().min(1).max(65_535)).max(32).optional(),
});
type EgressRule = z.infer<typeof ZEgressRule>;

const EGRESS_MODES = ["off", "allowlist", "open"] as const;
const ZEgressMode = z.enum(EGRESS_MODES);

export const ZEgressPolicy = z.object({
  mode: ZEgressMode,
  allow: z.array(ZEgressRule).max(200).default([]),
});
export type EgressPolicy = z.infer<typeof ZEgressPolicy>;

const EGRESS_OFF: EgressPolicy = { mode: "off", allow: [] };

function isRuleHost(value: string): boolean {
  const [net, prefix, extra] = value.split("/");
  if (extra !== undefined) return false;
  const family = isIP(net ?? "");
  if (prefix !== undefined) {
    const bits = Number(prefix);
    return family !== 0 && Number.isInteger(bits) && bits >= 0 && bits <= (family === 6 ? 128 : 32);
  }
  return family !== 0 || HOST_NAME.test(value);
}

/** An agent's policy replaces its tenant's whole (no merge: what an admin sets for an agent is what it gets). */
export function effectiveEgressPolicy(tenant: EgressPolicy | null, agent: EgressPolicy | null): EgressPolicy {
  return agent ?? tenant ?? EGRESS_OFF;
}

/** Host names and `*.` patterns match case-insensitively; `*.example.com` matches below it, not itself. */
export function hostMatches(pattern: string, host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (pattern.startsWith("*.")) return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
  return name === pattern;
}

function portMatches(rule: EgressRule, port: number): boolean {
  return !rule.ports?.length || rule.ports.includes(port);
}

function unmapped(address: string): { address: string; family: "ipv4" | "ipv6" } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return { address: mapped[1]!, family: "ipv4" };
  return { address, family: isIP(address) === 6 ? "ipv6" : "ipv4" };
}

/** True when an IP or CIDR rule (never a name) names `address` on `port`. */
function addressListed(rules: readonly EgressRule[], address: string, port: number): boolean {
  const { address: plain, family } = unmapped(address);
  return rules.some((rule) => {
    if (!portMatches(rule, port)) return false;
    const [net, prefix] = rule.host.split("/");
    const ruleFamily = isIP(net ?? "");
    if (ruleFamily === 0) return false;
    const list = new BlockList();
    const type = ruleFamily === 6 ? "ipv6" : "ipv4";
    if (prefix === undefined) list.addAddress(net!, type);
    else list.addSubnet(net!, Number(prefix), type);
    return list.check(plain, family);
  });
}

export type EgressVerdict =
  { allowed: true } | { allowed: false; reason: EgressRefusalReason; message: string };

export type EgressRefusalReason =
  | "egress_off"
  | "host_not_allowed"
  | "address_not_public"
  | "secret_host_not_bound"
  | "unknown_secret"
  | "resolve_failed"
  | "bad_request"
  | "unauthenticated";

/** May the workspace reach `host:port` by name (before any address is known)? */
export function checkHost(policy: EgressPolicy, host: string, port: number): EgressVerdict {
  if (policy.mode === "off") return refuse("egress_off", "egress is off for this workspace");
  if (policy.mode === "open") return { allowed: true };
  const literal = isIP(host) !== 0;
  const named = policy.allow.some((rule) =>
    literal ? addressListed([rule], host, port) : portMatches(rule, port) && hostMatches(rule.host, host),
  );
  return named ? { allowed: true } : refuse("host_not_allowed", `${host}:${port} is not on the allow-list`);
}

/** Every address `host` resolved to must be public or listed by address (see the file's comment). */
export function checkAddresses(
  policy: EgressPolicy,
  host: string,
  port: number,
  addresses: readonly string[],
): EgressVerdict {
  for (const address of addresses) {
    if (isPublicAddress(address) || addressListed(policy.allow, address, port)) continue;
    return refuse(
      "address_not_public",
      `${host} resolves to ${address}, a private, loopback or link-local address that the policy does not list`,
    );
  }
  return { allowed: true };
}

function refuse(reason: EgressRefusalReason, message: string): EgressVerdict {
  return { allowed: false, reason, message };
}
