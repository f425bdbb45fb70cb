import { beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { createAgent } from "@/server/modules/agent/agent.data";
import {
  createSession,
  getSession,
  listSessions,
  updateSession,
} from "@/server/modules/session/session.data";
import { deriveSecretKey } from "@/server/auth/secrets";
import { createTestTenant, type TestTenant } from "./fixtures";

describe("a session's workspace id is set once and never changes", () => {
  let t: TestTenant;
  let sessionId: string;
  let agentId: string;

  beforeAll(async () => {
    t = await createTestTenant();
    const agent = await createAgent(
      t.scope,
      { name: "a", modelConfig: { provider: "p", model: "m" } },
      deriveSecretKey("0123456789abcdef"),
      getDb(),
    );
    agentId = agent.id;
    sessionId = (
      await createSession(t.scope, { agentId, workspaceId: "ws-original", name: "first" }, getDb())
    ).id;
  });

  it("the database trigger rejects a raw UPDATE of workspace_id", async () => {
    await expect(
      getDb().$executeRawUnsafe(`UPDATE sessions SET workspace_id = 'ws-moved' WHERE id = $1`, sessionId),
    ).rejects.toThrow(/workspace_id is immutable/);
    expect((await getSession(t.scope, sessionId, getDb())).workspaceId).toBe("ws-original");
  });

  it("the trigger also stops an ORM update that bypasses the data layer", async () => {
    await expect(
      getDb().session.update({ where: { id: sessionId }, data: { workspaceId: "ws-moved" } }),
    ).rejects.toThrow(/immutable/);
  });

  it("other columns still update, and updateSession has no way to change the workspace", async () => {
    const updated = await updateSession(
      t.scope,
      sessionId,
      {
        name: "renamed",
        status: "RUNNING",
        workspaceId: "ws-moved",
      } as never,
      getDb(),
    );
    expect(updated).toMatchObject({ name: "renamed", status: "RUNNING", workspaceId: "ws-original" });
    // Writing the same value is not a change, so the trigger allows it.
    await getDb().$executeRawUnsafe(
      `UPDATE sessions SET workspace_id = workspace_id WHERE id = $1`,
      sessionId,
    );
  });

  it("team workers point at their leader and can be listed by it", async () => {
    const worker = await createSession(
      t.scope,
      {
        agentId,
        workspaceId: "ws-worker",
        leaderSessionId: sessionId,
      },
      getDb(),
    );
    expect(worker.leaderSessionId).toBe(sessionId);
    expect(
      (await listSessions(t.scope, { leaderSessionId: sessionId }, getDb())).items.map((s) => s.id),
    ).toEqual([worker.id]);
  });
});
