import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { loadRedisConfig } from "@/server/config/redis";
import { getLogger } from "@/server/logger";
import { createAgent } from "@/server/modules/agent/agent.data";
import { startFakeModel } from "@/test/fixtures/fake-model/server";
import { rowReads, watchSqlByContext } from "@/test/integration/db/sql-reads";
import { startWorkerRuntime } from "@/workers/runtime";
import { result, type BenchResult } from "./lib";
import { startStack } from "./service/stack";
import { processBerth } from "@/server/composition/process-berth";

/**
 * The reads of one chat turn (issue 23, "one read"): a real `chat.send` against the machine's PostgreSQL and
 * Redis (a throwaway database and prefix, see service/stack.ts), its workspace provisioned by in-process
 * workers on the installation's default backend, the model a loopback fake. The SQL the turn sends on its
 * own behalf is counted at the pg driver (test/integration/db/sql-reads.ts: the workers' statements run in
 * another async context and are not the API's); each figure is the reads of one row against the one read
 * a turn needs. test/integration/chat/turn-reads.test.ts asserts the same numbers.
 */
export async function run(): Promise<BenchResult[]> {
  const stack = await startStack();
  const fake = await startFakeModel({ apiKey: "sk-bench" });
  const engine = processBerth().engine;
  const workers = await startWorkerRuntime({
    redis: loadRedisConfig(),
    workers: { ...getConfig().workers, concurrency: 2 },
    log: getLogger(),
    healthPort: null,
    schedules: [],
    engine,
  });
  const sql = watchSqlByContext();
  try {
    const agent = await createAgent(
      stack.scope,
      {
        name: "reader",
        modelConfig: { provider: "openai-compatible", baseUrl: fake.baseUrl, model: "fake-model" },
        modelApiKey: "sk-bench",
      },
      secretKeyFromBytes(getConfig().secrets.encryptionKey),
      processBerth().db,
    );
    const session = await processBerth().agents.session.create(stack.scope, { agentId: agent.id });
    const turn = async (message: string) => {
      fake.enqueue({ kind: "text", text: `answer to ${message}` });
      const { statements } = await sql.during(async () => {
        for await (const event of await processBerth().agents.chat.send(stack.scope, {
          sessionId: session.sessionId,
          message,
        })) {
          if (event.type === "done" && event.status !== "completed") throw new Error(`turn ${event.status}`);
        }
      });
      return {
        sessions: rowReads(statements, "sessions", session.sessionId),
        agents: rowReads(statements, "agents", agent.id),
        workspaces: rowReads(statements, "workspaces", session.workspaceId),
      };
    };
    const cold = await turn("first");
    const warm = await turn("second");
    const figure = (name: string, value: number, baselineValue: number, baseline: string) =>
      result({ name, value, unit: "reads", baseline, baselineValue, target: { atMost: 1 } });
    return [
      figure("chat turn reads of its workspace row (warm)", warm.workspaces, 1, "1: the lease's lock"),
      figure("chat turn reads of its session row (warm)", warm.sessions, 1, "1"),
      figure("chat turn reads of its agent row (warm)", warm.agents, 1, "1"),
      figure(
        "chat turn reads of its workspace row in the API (cold)",
        cold.workspaces,
        2,
        "2: the lease's lock, the record once provisioned",
      ),
    ];
  } finally {
    sql.stop();
    await workers.stop();
    await fake.close();
    await stack.close();
  }
}
