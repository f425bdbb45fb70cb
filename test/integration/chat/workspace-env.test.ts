import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCaller } from "@/server/api/root";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { listAuditLogs } from "@/server/modules/audit/audit.data";
import { getConfig } from "@/server/config/config";
import { getRedis } from "@/server/redis";
import { addMember } from "@/server/modules/member/member.data";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { contextFromHeaders } from "../api/support/api-test-runtime";
import { createUser } from "../api/support/tenant-fixtures";
import { rejectionCode } from "../api/support/call-by-path";
import { sendChat, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Environment variables of agents and sessions (issue 25): set through the API, stored, shown, and seen
 * by the agent's Bash commands in a real turn (real Postgres, Redis, workers and local workspace; only the
 * model is the loopback fake). A session's own override its agent's of the same name.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;

beforeAll(async () => {
  h = await startAgentApiHarness("env");
  fake = await startFakeModel({ apiKey: "sk-env" });
});
afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const PRINT = 'printf "%s|%s|%s" "$GREETING" "$ONLY_AGENT" "${ONLY_SESSION:-unset}"';

/** One turn whose Bash call prints the three variables; the tool's output. */
async function printedBy(sessionId: string): Promise<string> {
  fake.enqueue(
    {
      kind: "tool-calls",
      calls: [{ id: `c_${randomUUID().slice(0, 8)}`, name: "Bash", arguments: { command: PRINT } }],
    },
    { kind: "text", text: "done" },
  );
  const events = await sendChat(h.owner, { ...h.ref, sessionId, message: "print" });
  const result = events.find((event) => event.type === "tool-result") as { output: string } | undefined;
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  return result!.output;
}

describe("agent and session environment variables", () => {
  it("reach the agent's Bash: the agent's for every session, a session's own over them, changes on the next turn", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `env-${randomUUID().slice(0, 6)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-env" },
      env: { GREETING: "hello from the agent", ONLY_AGENT: "a=b c" },
    });
    expect(agent.env).toEqual({ GREETING: "hello from the agent", ONLY_AGENT: "a=b c" });

    const plain = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    expect(await printedBy(plain.sessionId)).toBe("hello from the agent|a=b c|unset");

    const own = await h.owner.session.create({
      ...h.ref,
      agentId: agent.id,
      env: { GREETING: "hello from the session", ONLY_SESSION: "yes" },
    });
    expect((await h.owner.session.get({ ...h.ref, sessionId: own.sessionId })).env).toEqual({
      GREETING: "hello from the session",
      ONLY_SESSION: "yes",
    });
    expect(await printedBy(own.sessionId)).toBe("hello from the session|a=b c|yes");

    // Changed on the agent and on the session: the next turn sees both (same cached workspace).
    await h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { env: { ONLY_AGENT: "changed" } } });
    await h.owner.session.update({
      ...h.ref,
      sessionId: own.sessionId,
      patch: { env: { ONLY_SESSION: "again" } },
    });
    expect(await printedBy(own.sessionId)).toBe("|changed|again");
    // A rename keeps the variables.
    await h.owner.session.update({ ...h.ref, sessionId: own.sessionId, patch: { name: "renamed" } });
    expect(await h.owner.session.get({ ...h.ref, sessionId: own.sessionId })).toMatchObject({
      name: "renamed",
      env: { ONLY_SESSION: "again" },
    });

    // The audit names what changed, never a value.
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getConfig().redis.prefix,
    });
    const entries = await listAuditLogs(
      h.tenant.ownerScope,
      { action: "session.update", limit: 5 },
      processBerth().db,
    );
    expect(entries.items.map((entry) => entry.details)).toEqual([
      { fields: ["name"] },
      { fields: ["env"], envNames: ["ONLY_SESSION"] },
    ]);
    expect(JSON.stringify(entries.items)).not.toContain("again");
  });

  it("refuses names the workspace owns, Berth's prefix, NUL bytes and too many variables, with a typed 400", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `env-bad-${randomUUID().slice(0, 6)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model" },
    });
    expect(agent.env).toEqual({});
    const { sessionId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, "x"]));
    for (const env of [
      { PATH: "/evil" },
      { HOME: "/" },
      { BERTH_TOKEN: "x" },
      { "1BAD": "x" },
      { "A-B": "x" },
      { OK: "a\0b" },
      tooMany,
    ]) {
      expect(await rejectionCode(h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { env } }))).toBe(
        "BAD_REQUEST",
      );
      expect(await rejectionCode(h.owner.session.update({ ...h.ref, sessionId, patch: { env } }))).toBe(
        "BAD_REQUEST",
      );
    }
    // An empty patch and unknown fields are refused too.
    for (const patch of [{}, { env: {}, status: "CLOSED" }]) {
      expect(await rejectionCode(h.owner.session.update({ ...h.ref, sessionId, patch }))).toBe("BAD_REQUEST");
    }
    // Nothing was stored by the refused calls.
    expect((await h.owner.agent.get({ ...h.ref, agentId: agent.id })).env).toEqual({});
    expect((await h.owner.session.get({ ...h.ref, sessionId })).env).toEqual({});
  });

  it("a member changes only their own sessions' variables; a viewer none", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `env-roles-${randomUUID().slice(0, 6)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model" },
    });
    const memberUser = await createUser(
      h.runtime.auth,
      `member-${randomUUID().slice(0, 8)}@example.test`,
      "Member",
    );
    await addMember(h.tenant.ownerScope, { userId: memberUser.id, role: "member" }, processBerth().db);
    const member = createCaller(contextFromHeaders(h.runtime, { cookie: memberUser.cookie }));

    const owners = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    const mine = await member.session.create({ ...h.ref, agentId: agent.id, env: { MINE: "1" } });
    await member.session.update({ ...h.ref, sessionId: mine.sessionId, patch: { env: { MINE: "2" } } });
    expect((await member.session.get({ ...h.ref, sessionId: mine.sessionId })).env).toEqual({ MINE: "2" });

    expect(
      await rejectionCode(
        member.session.update({ ...h.ref, sessionId: owners.sessionId, patch: { env: { X: "1" } } }),
      ),
    ).toBe("NOT_FOUND");
    expect(
      await rejectionCode(
        h.viewer.session.update({ ...h.ref, sessionId: mine.sessionId, patch: { env: {} } }),
      ),
    ).toBe("FORBIDDEN");
    expect((await h.owner.session.get({ ...h.ref, sessionId: owners.sessionId })).env).toEqual({});
  });
});
