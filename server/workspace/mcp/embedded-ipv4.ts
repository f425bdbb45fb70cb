import { isIPv6 } from "node:net";

/**
 * The IPv4 addresses an IPv6 address carries inside it, for the transition forms that route to them: a
 * literal such as `[2002:7f00:1::]` (6to4 of 127.0.0.1) must be judged by the IPv4 it reaches, or it slips
 * past a check that only knows the IPv6 ranges.
 * - IPv4-mapped `::ffff:a.b.c.d` (::ffff:0:0/96) and IPv4-translated `::ffff:0:a.b.c.d` (::ffff:0:0:0/96);
 * - IPv4-compatible `::a.b.c.d` (::/96, deprecated; `::` and `::1` are checked as IPv6 already);
 * - 6to4 `2002:AABB:CCDD::/48`: the IPv4 in bits 16-47;
 * - Teredo `2001:0::/32`: the server's IPv4 in bits 32-63 and the client's, inverted, in bits 96-127.
 * NAT64 (64:ff9b::/96, 64:ff9b:1::/48) is refused as a whole by the caller's range list.
 */
export function embeddedIPv4Addresses(address: string): string[] {
  const words = ipv6Words(address);
  if (!words) return [];
  const zeros = (from: number, to: number) => words.slice(from, to).every((word) => word === 0);
  if (zeros(0, 5) && words[5] === 0xffff) return [ipv4Of(words[6]!, words[7]!)];
  if (zeros(0, 4) && words[4] === 0xffff && words[5] === 0) return [ipv4Of(words[6]!, words[7]!)];
  if (zeros(0, 6)) return [ipv4Of(words[6]!, words[7]!)];
  if (words[0] === 0x2002) return [ipv4Of(words[1]!, words[2]!)];
  if (words[0] === 0x2001 && words[1] === 0) {
    return [ipv4Of(words[2]!, words[3]!), ipv4Of(words[6]! ^ 0xffff, words[7]! ^ 0xffff)];
  }
  return [];
}

function ipv4Of(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join(".");
}

/** The eight 16-bit words of an IPv6 address (zone id ignored), or null when it is not one. */
function ipv6Words(address: string): number[] | null {
  const plain = address.replace(/%.*$/, "");
  if (!isIPv6(plain)) return null;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(plain);
  const text = dotted
    ? `${plain.slice(0, dotted.index)}${((Number(dotted[1]) << 8) | Number(dotted[2])).toString(16)}:${(
        (Number(dotted[3]) << 8) |
        Number(dotted[4])
      ).toString(16)}`
    : plain;
  const [head = "", tail] = text.split("::");
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((word) => parseInt(word, 16)));
  const front = parse(head);
  if (tail === undefined) return front.length === 8 ? front : null;
  const back = parse(tail);
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}
