/**
 * The Postgres turn claim (chat-turn.data.ts) on the real database: concurrent claims of one session from
 * many "processes" leave exactly one turn, a key's sends collapse into one turn, a running claim is busy
 * however stale (the registry decides by process liveness) and an interrupted one stores the user's message
 * and the marker, and a turn interrupted under its owner keeps the interruption when it
 * ends (its own messages follow the marker). The dead-holder reaper takes a stale claim only from an owner
 * not known alive.
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import { createLogger } from "@/server/logger";
import { createAgent } from "@/server/modules/agent/agent.data";
import {
  claimTurn,
  finishTurn,
  getTurn,
  heartbeatTurn,
  interruptTurn,
  INTERRUPTED_MARKER,
} from "@/server/modules/chat/chat-turn.data";
import { reapDeadHolders } from "@/server/modules/chat/dead-holders";
import { createSession, getSession, listChatMessages } from "@/server/modules/session/session.data";
import { createTestTenant, type TestTenant } from "../db/fixtures";

let t: TestTenant;
let agentId: string;

beforeAll(async () => {
  t = await createTestTenant();
  const agent = await createAgent(
    t.scope,
    { name: `claims-${randomUUID().slice(0, 8)}`, modelConfig: { provider: "p", model: "m" } },
    secretKeyFromBytes(Buffer.alloc(32, 7)),
    getDb(),
  );
  agentId = agent.id;
});

const newSession = async () =>
  (await createSession(t.scope, { agentId, workspaceId: `claims-ws-${randomUUID()}` }, getDb())).id;

const claim = (sessionId: string, ownerId: string, idempotencyKey: string | null = null) =>
  claimTurn(t.scope, { sessionId, ownerId, idempotencyKey, userMessage: `from ${ownerId}` }, getDb());

const completed = {
  done: {
    type: "done" as const,
    status: "completed" as const,
    finishReason: "stop",
    usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
    steps: 1,
  },
  text: "hello",
  error: null,
};

describe("chat turn claims", () => {
  it("20 processes claim one session at once: exactly one turn runs", async () => {
    const sessionId = await newSession();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) => claim(sessionId, `p${index}`)),
    );
    expect(results.filter((result) => result.kind === "claimed")).toHaveLength(1);
    expect(results.filter((result) => result.kind === "busy")).toHaveLength(19);
    const session = await getSession(t.scope, sessionId, getDb());
    expect(session.status).toBe("RUNNING");
  });

  it("sends with one key collapse into one turn, which a later send with the key reports", async () => {
    const sessionId = await newSession();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => claim(sessionId, "p1", "key-same-0001")),
    );
    const claimed = results.filter((result) => result.kind === "claimed");
    expect(claimed).toHaveLength(1);
    expect(results.filter((result) => result.kind === "same-key")).toHaveLength(9);
    const turnId = claimed[0]!.turn.id;
    await finishTurn(
      t.scope,
      sessionId,
      turnId,
      {
        outcome: completed,
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: [{ type: "text", text: "hello" }] },
        ],
        compaction: null,
        sessionStatus: "IDLE",
      },
      getDb(),
    );
    const later = await claim(sessionId, "p2", "key-same-0001");
    expect(later).toMatchObject({
      kind: "same-key",
      turn: { id: turnId, status: "COMPLETED", outcome: completed },
    });
    expect((await getSession(t.scope, sessionId, getDb())).status).toBe("IDLE");
  });

  it("a running claim is busy however stale; once interrupted (message and marker stored) the session is taken, and the old owner ends after the marker", async () => {
    const sessionId = await newSession();
    const first = await claim(sessionId, "crashed");
    expect(first.kind).toBe("claimed");
    await getDb().chatTurn.update({
      where: { id: first.turn.id },
      data: { heartbeatAt: new Date(Date.now() - 3_600_000) },
    });
    // Whether its owner is dead is the registry's call (process liveness), not the claim's.
    expect(await claim(sessionId, "survivor")).toMatchObject({ kind: "busy", turn: { id: first.turn.id } });
    expect(await interruptTurn(t.scope, sessionId, first.turn.id, getDb())).toBe(true);
    const second = await claim(sessionId, "survivor");
    expect(second.kind).toBe("claimed");
    expect(await getTurn(t.scope, first.turn.id, getDb())).toMatchObject({ status: "INTERRUPTED" });
    expect(await heartbeatTurn(first.turn.id, "crashed", getDb())).toBe(false);
    expect(
      (await listChatMessages(t.scope, sessionId, undefined, getDb())).map((m) => [m.role, m.content]),
    ).toEqual([
      ["user", "from crashed"],
      ["assistant", [{ type: "text", text: INTERRUPTED_MARKER }]],
    ]);
    // The "crashed" owner was only slow: its end is stored after the marker, the interruption stands.
    const late = await finishTurn(
      t.scope,
      sessionId,
      first.turn.id,
      {
        outcome: completed,
        messages: [
          { role: "user", content: "from crashed" },
          { role: "assistant", content: [{ type: "text", text: "late" }] },
        ],
        compaction: null,
        sessionStatus: "IDLE",
      },
      getDb(),
    );
    expect(late).toEqual({ interrupted: true });
    expect((await listChatMessages(t.scope, sessionId, undefined, getDb())).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "assistant",
    ]);
    expect((await getSession(t.scope, sessionId, getDb())).status).toBe("RUNNING"); // the survivor's turn
  });

  it("the reaper interrupts a stale claim only when its owner is not known alive (a live one's renewals may lag)", async () => {
    const [beating, silent] = await Promise.all([newSession(), newSession()]);
    const turns = [await claim(beating, "beating-owner"), await claim(silent, "silent-owner")].map(
      (result) => {
        if (result.kind !== "claimed") throw new Error(`expected a claim, got ${result.kind}`);
        return result.turn.id;
      },
    );
    await getDb().chatTurn.updateMany({
      where: { id: { in: turns } },
      data: { heartbeatAt: new Date(Date.now() - 120_000) },
    });
    await reapDeadHolders({
      db: getDb(),
      liveness: {
        ownerId: "reaper",
        // Redis knows the first owner beats; of the second it knows nothing (its set was lost).
        classify: (ids) => Promise.resolve({ alive: ids.filter((id) => id === "beating-owner"), dead: [] }),
      },
      turnTtlMs: 60_000,
      isRunningHere: () => false,
      log: createLogger({ level: "silent" }),
    });
    expect((await getTurn(t.scope, turns[0]!, getDb()))?.status).toBe("RUNNING");
    expect((await getTurn(t.scope, turns[1]!, getDb()))?.status).toBe("INTERRUPTED");
  });
});
