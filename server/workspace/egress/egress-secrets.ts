import { z } from "zod";
import { hostMatches, type EgressVerdict } from "./egress-policy";

/**
 * Secrets a workspace uses but never sees (issue 25). An agent's env (or an MCP declaration's) holds the
 * PLACEHOLDER `berth-secret://<name>`; the value lives sealed in Postgres and, unsealed, only in the host's
 * egress proxy for the turn that uses it. The proxy replaces a placeholder in an outgoing request's headers
 * with the value, and only toward the hosts the secret is bound to: a placeholder aimed at any other host
 * (or naming no secret of the agent) refuses the whole request, so a command cannot send the value
 * elsewhere by asking nicely. Bodies and URLs are never rewritten (the value would echo into logs and
 * redirects), and an HTTPS tunnel is opaque: only plain-HTTP requests get values (README "Egress and secrets").
 */
const SECRET_PLACEHOLDER_PREFIX = "berth-secret://";
export const ZSecretName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "lower-case letters, digits, - and _ (at most 63)");

const PLACEHOLDER = /berth-secret:\/\/([a-z0-9][a-z0-9_-]{0,62})/g;

export function secretPlaceholder(name: string): string {
  return `${SECRET_PLACEHOLDER_PREFIX}${name}`;
}

/** One secret as the proxy holds it for a grant: the value, unsealed, only in this process' memory. */
export type EgressSecret = { name: string; value: string; hosts: readonly string[] };

/** Is `host` one of the secret's bound hosts (names, `*.` patterns or literal addresses)? */
function secretBoundTo(secret: EgressSecret, host: string): boolean {
  return secret.hosts.some((pattern) => hostMatches(pattern.toLowerCase(), host));
}

export type HeaderRewrite =
  | { verdict: { allowed: true }; headers: Record<string, string | string[]>; used: string[] }
  | { verdict: Exclude<EgressVerdict, { allowed: true }>; names: string[] };

/**
 * The request's headers with every placeholder replaced, or the refusal when one names no secret of the
 * grant or a secret not bound to `host`. `used` names the secrets that were put in (for the audit).
 */
export function rewriteHeaders(
  headers: Record<string, string | string[] | undefined>,
  secrets: readonly EgressSecret[],
  host: string,
): HeaderRewrite {
  const byName = new Map(secrets.map((secret) => [secret.name, secret]));
  const names = new Set<string>();
  for (const value of Object.values(headers)) {
    for (const one of [value ?? []].flat())
      for (const match of one.matchAll(PLACEHOLDER)) names.add(match[1]!);
  }
  const unknown = [...names].filter((name) => !byName.has(name));
  if (unknown.length > 0) {
    return {
      verdict: {
        allowed: false,
        reason: "unknown_secret",
        message: `no secret named ${unknown.join(", ")} is available to this agent`,
      },
      names: unknown,
    };
  }
  const unbound = [...names].filter((name) => !secretBoundTo(byName.get(name)!, host));
  if (unbound.length > 0) {
    return {
      verdict: {
        allowed: false,
        reason: "secret_host_not_bound",
        message: `secret ${unbound.join(", ")} may not be sent to ${host} (not one of its hosts)`,
      },
      names: unbound,
    };
  }
  const out: Record<string, string | string[]> = {};
  const put = (text: string) => text.replace(PLACEHOLDER, (_whole, name: string) => byName.get(name)!.value);
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[key] = Array.isArray(value) ? value.map(put) : put(value);
  }
  return { verdict: { allowed: true }, headers: out, used: [...names] };
}
