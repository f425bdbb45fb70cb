import autocannon from "autocannon";
import { type Inflight } from "./inflight";
import { type SqlLog } from "./sql-log";

export type HttpTarget = {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
};

export type LoadFigures = { rps: number; p99Ms: number; requests: number };

const CONNECTIONS = 32;
const WARMUP_S = 1;
const DURATION_S = 5;

/**
 * autocannon on its own worker thread (so load generation does not share the servers' event loop): a 1 s
 * warm-up, then a 5 s run with 32 connections. Any non-2xx answer or socket error fails the bench, so a
 * broken request can never pass for a fast one.
 */
export async function load(target: HttpTarget, inflight: Inflight): Promise<LoadFigures> {
  const options = {
    url: target.url,
    method: target.method,
    headers: target.headers,
    ...(target.body !== undefined ? { body: target.body } : {}),
    connections: CONNECTIONS,
    workers: 1,
  };
  await autocannon({ ...options, duration: WARMUP_S });
  await inflight.idle();
  const result = await autocannon({ ...options, duration: DURATION_S });
  await inflight.idle();
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `${target.method} ${target.url}: ${result.non2xx} non-2xx answers, ${result.errors} errors ` +
        `of ${result.requests.total} requests`,
    );
  }
  return {
    rps: result.requests.total / result.duration,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
  };
}

/**
 * SQL statements per request, from `n` sequential requests (exact, unlike counting under load, where
 * requests cut off at the end of a run still send statements).
 */
export async function sqlPerRequest(
  sql: SqlLog,
  target: HttpTarget,
  inflight: Inflight,
  n = 20,
): Promise<number> {
  await inflight.idle();
  const before = sql.count;
  for (let i = 0; i < n; i++) {
    const response = await fetch(target.url, {
      method: target.method,
      headers: target.headers,
      ...(target.body !== undefined ? { body: target.body } : {}),
    });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${target.method} ${target.url}: HTTP ${response.status}`);
  }
  return (sql.count - before) / n;
}
