import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import { embeddedIPv4Addresses } from "@/server/workspace/mcp/embedded-ipv4";

/**
 * Where an `http_mcp` declaration may point when Berth itself dials it (the local backend: the request leaves
 * from the Berth host). Loopback, link-local, private, CGNAT, multicast and unspecified addresses are refused
 * unless the operator allowlists the host name, the address or its subnet (BERTH_MCP_ALLOWED_HOSTS), so a
 * member cannot make Berth post to its own admin ports, a cloud metadata service or the office network.
 * Every address a name resolves to is checked, at declaration time AND at every connect (the guarded fetch's
 * `lookup` hook), so a name that re-resolves to 127.0.0.1 after the check (DNS rebinding) is refused too.
 */
export type McpNetworkPolicy = {
  /** Host names (exact, case-insensitive), IP addresses or CIDR subnets allowed even when not public. */
  readonly allowedHosts: readonly string[];
};

export const DEFAULT_MCP_NETWORK_POLICY: McpNetworkPolicy = { allowedHosts: [] };

const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96], // NAT64 of IPv4 (may reach private IPv4 space)
  ["64:ff9b:1::", 48], // local-use NAT64 (RFC 8215)
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv6");
}

/** IPv4-mapped IPv6 (`::ffff:127.0.0.1`) is checked as the IPv4 address it is. */
function unmapped(address: string): { address: string; family: "ipv4" | "ipv6" } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return { address: mapped[1]!, family: "ipv4" };
  return { address, family: isIP(address) === 6 ? "ipv6" : "ipv4" };
}

/**
 * Not in a non-public range, and for IPv6 no embedded IPv4 (6to4, Teredo, IPv4-compatible or -translated)
 * in one either: `[2002:7f00:1::]` reaches 127.0.0.1 as surely as `127.0.0.1` does.
 */
export function isPublicAddress(address: string): boolean {
  const { address: plain, family } = unmapped(address);
  if (NON_PUBLIC.check(plain, family)) return false;
  return family === "ipv4" || embeddedIPv4Addresses(plain).every((ipv4) => !NON_PUBLIC.check(ipv4, "ipv4"));
}

function allowList(policy: McpNetworkPolicy): { names: Set<string>; addresses: BlockList } {
  const names = new Set<string>();
  const addresses = new BlockList();
  for (const entry of policy.allowedHosts) {
    const [net, prefix] = entry.split("/");
    const family = isIP(net ?? "");
    if (family === 0) names.add(entry.toLowerCase());
    else if (prefix === undefined) addresses.addAddress(net!, family === 6 ? "ipv6" : "ipv4");
    else addresses.addSubnet(net!, Number(prefix), family === 6 ? "ipv6" : "ipv4");
  }
  return { names, addresses };
}

function refused(host: string, address: string, subject: string): AppError {
  return new AppError("FORBIDDEN", `MCP host ${host} resolves to non-public address ${address}`, {
    userMessage: `${subject}'s host ${host} resolves to a private, loopback or link-local address (${address}). An operator can allow it with BERTH_MCP_ALLOWED_HOSTS.`,
    details: { reason: "mcp_host_not_allowed", host, address },
  });
}

/**
 * The checker one policy builds: throws FORBIDDEN for a non-public address not on the allowlist. `subject`
 * names the URL in the caller's messages (the guard also checks webhook endpoints, not only MCP servers).
 */
export function createMcpAddressGuard(policy: McpNetworkPolicy, options: { subject?: string } = {}) {
  const subject = options.subject ?? "The MCP URL";
  const allowed = allowList(policy);
  const hostAllowed = (host: string) => allowed.names.has(host.toLowerCase());
  const assertAddress = (host: string, address: string) => {
    if (hostAllowed(host) || isPublicAddress(address)) return;
    const { address: plain, family } = unmapped(address);
    if (allowed.addresses.check(plain, family)) return;
    throw refused(host, address, subject);
  };

  /** `net`'s lookup hook: resolves every address, refuses the connection when any is not allowed. */
  const lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, resolved: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      try {
        for (const entry of resolved) assertAddress(hostname, entry.address);
      } catch (refusal) {
        return callback(refusal as Error, "", 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, resolved);
      const first = resolved[0];
      if (!first) return callback(new Error(`no address for ${hostname}`), "", 0);
      callback(null, first.address, first.family);
    });
  };

  return {
    /** Declaration-time check: the URL's host (a literal or every address it resolves to) must be allowed. */
    async assertUrlAllowed(rawUrl: string): Promise<void> {
      const url = new URL(rawUrl);
      const host = url.hostname.replace(/^\[|\]$/g, "");
      if (hostAllowed(host)) return;
      if (isIP(host) !== 0) return assertAddress(host, host);
      const resolved = await new Promise<LookupAddress[]>((resolve, reject) =>
        dnsLookup(host, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
      ).catch((error: unknown) => {
        throw new AppError("BAD_REQUEST", `cannot resolve MCP host ${host}: ${String(error)}`, {
          userMessage: `${subject}'s host ${host} does not resolve.`,
          details: { reason: "mcp_host_unresolved", host },
        });
      });
      for (const entry of resolved) assertAddress(host, entry.address);
    },

    /**
     * A `fetch` for the MCP SDK's HTTP transports that connects only where the policy allows (the check runs
     * in the socket's DNS lookup, so it holds for every connection, redirects included). IP-literal URLs skip
     * DNS, so they are checked here first.
     */
    fetch: async (input: string | URL, init?: RequestInit): Promise<Response> => {
      const url = new URL(input instanceof URL ? input.href : input);
      const host = url.hostname.replace(/^\[|\]$/g, "");
      if (isIP(host) !== 0) assertAddress(host, host);
      return guardedRequest(url, init ?? {}, lookup);
    },
  };
}

/** A minimal fetch over node:http(s) with a custom lookup (Node's global fetch has no such hook). */
function guardedRequest(url: URL, init: RequestInit, lookup: LookupFunction): Promise<Response> {
  const client = url.protocol === "https:" ? https : url.protocol === "http:" ? http : null;
  if (!client) return Promise.reject(new TypeError(`unsupported protocol ${url.protocol}`));
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, key) => (headers[key] = value));
  return new Promise<Response>((resolve, reject) => {
    const request = client.request(
      url,
      { method: init.method ?? "GET", headers, lookup, ...(init.signal ? { signal: init.signal } : {}) },
      (response) => {
        const responseHeaders = new Headers();
        for (const [key, value] of Object.entries(response.headers)) {
          if (Array.isArray(value)) for (const v of value) responseHeaders.append(key, v);
          else if (value !== undefined) responseHeaders.set(key, value);
        }
        const status = response.statusCode ?? 502;
        const noBody = status === 204 || status === 304 || init.method === "HEAD";
        if (noBody) response.resume();
        resolve(
          new Response(noBody ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>), {
            status,
            statusText: response.statusMessage ?? "",
            headers: responseHeaders,
          }),
        );
      },
    );
    request.on("error", reject);
    const body = init.body;
    if (body === undefined || body === null) request.end();
    else if (typeof body === "string" || body instanceof Uint8Array) request.end(body);
    else reject(new TypeError("the MCP transport sent an unsupported body type"));
  });
}
