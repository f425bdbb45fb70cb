import http from "node:http";
import type { AddressInfo } from "node:net";
import type { SecretKey } from "@/server/auth/secrets";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { registerWebhookProcessors } from "@/workers/processors/webhook.processors";
import { startWorkerRuntime } from "@/workers/runtime";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

type Received = { headers: http.IncomingHttpHeaders; body: string; at: number };

/**
 * A loopback receiver answering each request with the next scripted status (then 200). `/big` answers 4 MiB:
 * only the start of it may be read and kept.
 */
export async function startReceiver() {
  const received: Received[] = [];
  const script: number[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      });
      const status = script.shift() ?? 200;
      const body = request.url === "/big" ? "x".repeat(4 * 1024 * 1024) : `answer ${status}`;
      response.writeHead(status, { "content-type": "text/plain" }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    received,
    script,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Queues on an isolated Redis prefix and a worker runtime running the webhook processors, with the operator
 * policy allow-listing exactly the receiver's origin (http, loopback): nothing else is exempt.
 */
export async function startWebhookWorkers(options: {
  secretKey: SecretKey;
  policy: { allowedOrigins: string[] };
  connectionName: string;
}): Promise<{ queues: QueueSet<BerthJobCatalog>; close(): Promise<void> }> {
  const redis = isolatedRedisConfig();
  const connection = createRedisConnection(redis, "producer", options.connectionName);
  const queues = createQueues(jobCatalog, { connection, redis, log: testLog });
  const runtime = await startWorkerRuntime({
    redis,
    workers: { concurrency: 2, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: testLog,
    healthPort: null,
    schedules: [],
    register: (registry) =>
      registerWebhookProcessors(registry, {
        db: processBerth().db,
        queues,
        secretKey: options.secretKey,
        policy: options.policy,
      }),
  });
  return {
    queues,
    async close() {
      await runtime.stop();
      await queues.close();
      await connection.quit();
    },
  };
}
