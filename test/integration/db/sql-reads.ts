import { AsyncLocalStorage } from "node:async_hooks";
import pg from "pg";

/**
 * The SQL statements one piece of work sends, captured in this process at the pg driver (Prisma's adapter
 * included) and attributed by async context: `during(fn)` counts what `fn` sends, its promise chains, timers
 * and transactions included, and nothing that runs beside it (in-process workers, schedulers, reapers). A
 * pooled client is tagged with the context that checked it out, because the pool may hand a waiting query
 * its client from another query's callback, where the context is that other query's.
 */
export type SqlStatement = { text: string; values: readonly unknown[] };
export type SqlWatch = {
  during<T>(fn: () => Promise<T>): Promise<{ value: T; statements: SqlStatement[] }>;
  /** Puts the driver back as it was. */
  stop(): void;
};

type Capture = { statements: SqlStatement[] };
type Query = (this: pg.Client, ...args: unknown[]) => unknown;
type Connect = (this: pg.Pool, ...args: unknown[]) => unknown;
type ConnectCallback = (error: unknown, client: pg.PoolClient | undefined, release: unknown) => void;

const CHECKED_OUT_BY = Symbol("sql-reads.checkedOutBy");
type TaggedClient = pg.Client & { [CHECKED_OUT_BY]?: Capture | undefined };

export function watchSqlByContext(): SqlWatch {
  const context = new AsyncLocalStorage<Capture>();
  const clientProto = pg.Client.prototype as unknown as { query: Query };
  const poolProto = pg.Pool.prototype as unknown as { connect: Connect };
  const originalQuery = clientProto.query;
  const ownConnect = Object.prototype.hasOwnProperty.call(poolProto, "connect");
  const originalConnect = poolProto.connect;

  clientProto.query = function (this: TaggedClient, ...args: unknown[]) {
    // A pool's client belongs to whoever checked it out; a client used alone, to its caller.
    const capture = CHECKED_OUT_BY in this ? this[CHECKED_OUT_BY] : context.getStore();
    const [first, second] = args as [unknown, unknown];
    if (capture) {
      const config =
        typeof first === "object" && first !== null ? (first as { text?: string; values?: unknown[] }) : {};
      capture.statements.push({
        text: typeof first === "string" ? first : (config.text ?? "?"),
        values: Array.isArray(second) ? second : (config.values ?? []),
      });
    }
    return originalQuery.apply(this, args);
  };
  poolProto.connect = function (this: pg.Pool, ...args: unknown[]) {
    const capture = context.getStore();
    const tag = (client: pg.PoolClient | undefined) => {
      if (client) (client as TaggedClient)[CHECKED_OUT_BY] = capture;
    };
    const callback = args[0];
    if (typeof callback === "function") {
      return originalConnect.call(
        this,
        (error: unknown, client: pg.PoolClient | undefined, release: unknown) => {
          tag(client);
          (callback as ConnectCallback)(error, client, release);
        },
      );
    }
    return (originalConnect.call(this) as Promise<pg.PoolClient>).then((client) => {
      tag(client);
      return client;
    });
  };

  return {
    async during(fn) {
      const capture: Capture = { statements: [] };
      const value = await context.run(capture, fn);
      return { value, statements: capture.statements };
    },
    stop() {
      clientProto.query = originalQuery;
      if (ownConnect) poolProto.connect = originalConnect;
      else delete (poolProto as Partial<typeof poolProto>).connect;
    },
  };
}

/**
 * How many of `statements` read one row: SELECTs naming `table` after FROM or JOIN with the row's id among
 * their parameters. A `FOR UPDATE` lock is taken to write the row (the turn's claim and its end lock the
 * session to change it) and belongs to that write; a `FOR SHARE` lock writes nothing and is a read. A
 * COUNT over the table (a quota's count of the other workspaces, naming this one to leave it out) reads
 * no row.
 */
export function rowReads(statements: readonly SqlStatement[], table: string, id: string): number {
  const names = new RegExp(String.raw`\b(?:FROM|JOIN)\s+(?:"?public"?\.)?"?${table}"?(?![a-z0-9_])`, "i");
  return statements.filter(
    ({ text, values }) =>
      /^\s*(SELECT|WITH)\b/i.test(text) &&
      !/\bFOR\s+UPDATE\b/i.test(text) &&
      !/^\s*SELECT\s+COUNT\(/i.test(text) &&
      names.test(text) &&
      values.includes(id),
  ).length;
}
