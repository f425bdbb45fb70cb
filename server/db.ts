import { PrismaPg } from "@prisma/adapter-pg";
import { type Prisma, PrismaClient } from "@/generated/prisma/client";
import type { DatabaseConfig } from "@/server/config/database";
import { processRoot } from "@/server/shared/process-root";

/**
 * The Prisma client factory (the Berth root, server/composition/berth.ts, builds the process' one client
 * with it). Besides `*.data.ts` files this is the only module that imports Prisma.
 */
export type Db = PrismaClient;
/** A client or an interactive-transaction client; data functions accept either. */
export type DbClient = PrismaClient | Prisma.TransactionClient;

/** One database client (one pool) over the validated configuration. */
export function createDatabaseClient(
  config: Pick<DatabaseConfig, "url"> & Partial<Omit<DatabaseConfig, "url">>,
): PrismaClient {
  if (!config.url) {
    // adapter-pg would otherwise fall back to TCP localhost as the OS user and report a
    // misleading "access denied" (stack-compat P11).
    throw new Error("createDatabaseClient: databaseUrl is empty");
  }
  return new PrismaClient({
    adapter: new PrismaPg({
      connectionString: config.url,
      ...(config.poolMax ? { max: config.poolMax } : {}),
    }),
    ...(config.txMaxWaitMs ? { transactionOptions: { maxWait: config.txMaxWaitMs } } : {}),
  });
}

/**
 * The process root's database client, for tests and bench/ only: server code takes `db` from the root
 * (its caller or its deps), never from here.
 */
export function getDb(): PrismaClient {
  return processRoot<{ db: PrismaClient }>().db;
}

/**
 * Runs `fn` in a transaction: a new one on a client, the caller's own on a transaction client (so a data
 * function can be atomic alone and still join a larger transaction).
 */
export function inTransaction<T>(db: DbClient, fn: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T> {
  return "$transaction" in db ? db.$transaction(fn) : fn(db);
}

/** True for Prisma's unique-constraint violation (P2002), optionally on a given field. */
export function isUniqueViolation(error: unknown, field?: string): boolean {
  if (!isKnownPrismaError(error) || error.code !== "P2002") return false;
  if (!field) return true;
  const target = JSON.stringify(error.meta ?? {});
  return target.includes(field);
}

// Request errors that are about the moment, not the data: pool timeout, transaction API, write conflict.
const TRANSIENT_REQUEST_ERRORS = new Set(["P2024", "P2028", "P2034"]);

/**
 * True when the database refused the data itself, so retrying the same write can never succeed: a Prisma
 * request error (P2xxx) that is not about the moment, and, when Postgres' SQLSTATE is known, one of class
 * 22 (data exception: invalid text, NUL, bad JSON) or 23 (integrity constraint). False for connection and
 * transient errors.
 */
export function isRejectedData(error: unknown): boolean {
  if (!isKnownPrismaError(error) || !/^P2/.test(error.code) || TRANSIENT_REQUEST_ERRORS.has(error.code)) {
    return false;
  }
  const sqlState = sqlStateOf(error);
  return sqlState === null || /^2[23]/.test(sqlState);
}

function sqlStateOf(error: { meta?: unknown; message?: unknown }): string | null {
  const meta = error.meta as { driverAdapterError?: { cause?: { originalCode?: unknown } } } | undefined;
  const fromMeta = meta?.driverAdapterError?.cause?.originalCode;
  if (typeof fromMeta === "string") return fromMeta;
  const fromMessage = typeof error.message === "string" ? /Code: `([0-9A-Z]{5})`/.exec(error.message) : null;
  return fromMessage?.[1] ?? null;
}

function isKnownPrismaError(error: unknown): error is { code: string; meta?: unknown } {
  return (
    typeof error === "object" &&
    error !== null &&
    "code" in error &&
    typeof error.code === "string" &&
    /^P\d{4}$/.test(error.code)
  );
}

/** Page-size bounds shared by every list function. */
export function pageSize(limit: number | undefined, fallback = 50): number {
  return Math.min(Math.max(limit ?? fallback, 1), 200);
}
