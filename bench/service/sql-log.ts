import pg from "pg";

/**
 * Counts (and optionally records) the SQL statements every pg client of this process sends, Prisma's
 * adapter included: the bench checks that Berth and its bare baseline do the same database work.
 */
export type SqlLog = { count: number; texts: string[] | null; stop(): void };

type Query = (this: pg.Client, ...args: unknown[]) => unknown;

export function watchSql(record = false): SqlLog {
  // Typed as a plain function property: it is re-bound to each client below, never called unbound.
  const proto = pg.Client.prototype as unknown as { query: Query };
  const original = proto.query;
  const log: SqlLog = {
    count: 0,
    texts: record ? [] : null,
    stop: () => {
      proto.query = original;
    },
  };
  proto.query = function (this: pg.Client, ...args: unknown[]) {
    log.count += 1;
    const first = args[0];
    log.texts?.push(typeof first === "string" ? first : ((first as { text?: string } | null)?.text ?? "?"));
    return original.apply(this, args);
  };
  return log;
}
