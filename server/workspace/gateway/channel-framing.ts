/**
 * The gateway channel (protocol ≥ 3): one upgraded connection carrying the JSON requests of the HTTP
 * surface as lines, so a tool call costs a write and a read instead of an HTTP exchange (parsing, headers,
 * a request object each side: most of a call's overhead once the upstream server answers in 0.2 ms).
 * Requests are multiplexed by id and answered in any order; file transfers stay on HTTP (they stream).
 *
 * Lines (JSON text never holds a raw newline):
 * - host → gateway `<id> <method> <path> <json body, or nothing>` and `<id> CANCEL`;
 * - gateway → host `<id> <status> <json body>` (the body an HTTP answer would have had).
 */
export const CHANNEL_PATH = "/channel";
/** The `Upgrade` header value both sides expect. */
export const CHANNEL_PROTOCOL = "berth-gateway-channel";
export const CHANNEL_CANCEL = "CANCEL";
/** A longer line is a broken peer: the connection is dropped. Above the gateway's 32 MiB body bound. */
export const MAX_CHANNEL_LINE_BYTES = 64 * 1024 * 1024;

/** Splits `count` space-separated fields off the front of a line; the rest (possibly "") comes last. */
export function splitFields(line: string, count: number): string[] {
  const fields: string[] = [];
  let start = 0;
  for (let i = 0; i < count; i++) {
    const space = line.indexOf(" ", start);
    if (space === -1) {
      fields.push(line.slice(start));
      start = line.length + 1;
      continue;
    }
    fields.push(line.slice(start, space));
    start = space + 1;
  }
  fields.push(start <= line.length ? line.slice(start) : "");
  return fields;
}
