import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { collect, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { rowReads, watchSqlByContext, type SqlWatch } from "../db/sql-reads";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * What one turn reads (issue 23, "one read"): the SQL a `chat.send` sends on its own behalf, from the claim
 * to the stored end, counted per table at the pg driver. A warm turn (its workspace READY and attached in
 * this process) reads its session, its agent and its workspace row once each; a cold one (the workspace
 * provisioned by the workers first) reads the workspace row at most twice in the API process. The workers'
 * own statements run outside the turn's async context and are not counted (they are another process in
 * production).
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
let sql: SqlWatch;
let ids: { sessionId: string; agentId: string; workspaceId: string };

beforeAll(async () => {
  h = await startAgentApiHarness("reads");
  fake = await startFakeModel({ apiKey: "sk-reads" });
  const agent = await h.owner.agent.create({
    ...h.ref,
    name: "Reader",
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-reads" },
  });
  const session = await h.owner.session.create({ ...h.ref, agentId: agent.id });
  ids = { sessionId: session.sessionId, agentId: agent.id, workspaceId: session.workspaceId };
  sql = watchSqlByContext();
});

afterAll(async () => {
  sql?.stop();
  await fake?.close();
  await h?.close();
  await closeProcessBerth();
});

async function turnReads(message: string) {
  fake.enqueue({ kind: "text", text: `answer to ${message}` });
  const { value: events, statements } = await sql.during(async () =>
    collect(
      await processBerth().agents.chat.send(h.tenant.ownerScope, { sessionId: ids.sessionId, message }),
    ),
  );
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  return {
    sessions: rowReads(statements, "sessions", ids.sessionId),
    agents: rowReads(statements, "agents", ids.agentId),
    workspaces: rowReads(statements, "workspaces", ids.workspaceId),
  };
}

describe("the reads of one chat turn", () => {
  it("a cold turn reads its workspace row at most twice, its session and agent once; a warm one each once", async () => {
    const cold = await turnReads("first");
    const warm = await turnReads("second");
    expect({ sessions: cold.sessions, agents: cold.agents }).toEqual({ sessions: 1, agents: 1 });
    expect(cold.workspaces).toBeLessThanOrEqual(2);
    expect(warm).toEqual({ sessions: 1, agents: 1, workspaces: 1 });
  });
});
