import { BlockList, isIP } from "node:net";

/**
 * The client address of a request, trusting `X-Forwarded-For` ONLY from the operator's proxies
 * (BERTH_TRUSTED_PROXIES: IPs or CIDRs; default none). Without a trusted proxy the socket's peer is the
 * client, whatever headers it sent, so a client cannot pick its own address to dodge the sign-in throttle.
 * Behind trusted proxies the chain is walked right to left, skipping trusted hops: the first untrusted
 * address is the client (a client may prepend anything, but cannot forge what its proxy appended).
 */
export type TrustedProxies = { readonly list: BlockList; readonly count: number };

export function parseTrustedProxies(entries: readonly string[]): TrustedProxies {
  const list = new BlockList();
  for (const entry of entries) {
    const [net, prefix] = entry.split("/");
    const family = isIP(net ?? "") === 6 ? "ipv6" : "ipv4";
    if (prefix === undefined) list.addAddress(net!, family);
    else list.addSubnet(net!, Number(prefix), family);
  }
  return { list, count: entries.length };
}

function plain(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

function isTrusted(proxies: TrustedProxies, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && proxies.list.check(address, family === 6 ? "ipv6" : "ipv4");
}

export function resolveClientAddress(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  proxies: TrustedProxies,
): string | null {
  const socketAddress = peer ? plain(peer) : null;
  if (!socketAddress || proxies.count === 0 || !isTrusted(proxies, socketAddress)) return socketAddress;
  const chain = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : (forwardedFor ?? ""))
    .split(",")
    .map((hop) => plain(hop.trim()))
    .filter((hop) => hop.length > 0);
  let client = socketAddress;
  for (let i = chain.length - 1; i >= 0; i--) {
    const hop = chain[i]!;
    if (isIP(hop) === 0) break; // garbage: keep the last address a trusted hop vouched for
    client = hop;
    if (!isTrusted(proxies, hop)) break;
  }
  return client;
}
