import fs from "node:fs/promises";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { loadRedisConfig } from "@/server/config/redis";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { createAgentServices } from "@/server/modules/chat/chat.composition";
import { RedisCancelBus } from "@/server/modules/chat/redis-cancel-bus";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { rejectionCode } from "../api/support/call-by-path";
import { collect, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { hostWorkdirOf } from "../../drivers/local/support/sandbox-env";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * chat.send end to end through the tRPC caller: real Postgres, Redis (cancel requests, queues), in-process
 * workers provisioning a real local workspace, tools executed for real; only the model is the loopback fake.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
let agentId: string;

beforeAll(async () => {
  h = await startAgentApiHarness("chat");
  fake = await startFakeModel({ apiKey: "sk-chat-secret" });
  const agent = await h.owner.agent.create({
    ...h.ref,
    name: "Ada",
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-chat-secret" },
  });
  agentId = agent.id;
});

afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const newSession = async () => (await h.owner.session.create({ ...h.ref, agentId })).sessionId;

describe("chat.send", () => {
  it("streams a turn whose tool call runs in the session's real workspace, and stores it", async () => {
    const sessionId = await newSession();
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          {
            id: "c_bash",
            name: "Bash",
            arguments: { command: "mkdir -p notes && echo HELLO > notes/hello.txt && echo written" },
          },
        ],
      },
      { kind: "text", text: "I wrote the file." },
    );
    const events = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "write it" }));

    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(["tool-call", "tool-result", "text-delta", "done"]),
    );
    const done = events.at(-1);
    expect(done).toMatchObject({ type: "done", status: "completed" });
    const result = events.find((event) => event.type === "tool-result");
    expect(result).toMatchObject({ toolName: "Bash", isError: false });
    expect((result as { output: string }).output).toContain("written");
    expect(fake.requests[0]!.authorization).toBe("Bearer sk-chat-secret");

    const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, sessionId);
    expect(await fs.readFile(path.join(hostWorkdirOf(workspace), "notes", "hello.txt"), "utf8")).toBe(
      "HELLO\n",
    );

    const history = await h.owner.chat.history({ ...h.ref, sessionId });
    expect(history.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(history[0]!.content).toBe("write it");
    expect(JSON.stringify(history.at(-1)!.content)).toContain("I wrote the file.");

    // The next turn sends the stored conversation back to the model.
    fake.enqueue({ kind: "text", text: "Still here." });
    const before = fake.requests.length;
    await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "again" }));
    const sent = fake.requests[before]!.messages.map((message) => message.role);
    expect(sent).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
    expect((await h.owner.session.get({ ...h.ref, sessionId })).status).toBe("IDLE");
  });

  it("refuses a second turn in the same session with CONFLICT, across processes too, and cancels across processes", async () => {
    const sessionId = await newSession();
    fake.enqueue({ kind: "stall", text: ["thinking"] });
    const requestsBefore = fake.requests.length;
    const running = await h.owner.chat.send({ ...h.ref, sessionId, message: "take your time" });
    const drained = collect(running);
    const [stalled] = (await fake.waitForRequests(requestsBefore + 1)).slice(requestsBefore);

    expect(await rejectionCode(h.owner.chat.send({ ...h.ref, sessionId, message: "me too" }))).toBe(
      "CONFLICT",
    );

    // "Another API process": its own services, turn registry and Redis connections.
    const redisConfig = loadRedisConfig();
    const commands = new Redis(redisConfig.url);
    const subscriber = new Redis(redisConfig.url);
    try {
      const other = createAgentServices({
        lifecycle: processBerth().lifecycle,
        audit: processBerth().audit,
        db: processBerth().db,
        workspaces: h.workspace.replica(),
        secretKey: secretKeyFromBytes(getConfig().secrets.encryptionKey),
        cancelBus: new RedisCancelBus({ redis: commands, subscriber, prefix: redisConfig.prefix }),
        liveness: { ownerId: "other-process", classify: () => Promise.resolve({ alive: [], dead: [] }) },
        reapIntervalMs: 60_000,
        quota: () => processBerth().quota,
        attachTracker: () => processBerth().attachTracker,
        usage: () => processBerth().usage,
        stageSamples: () => processBerth().stageSamples,
      });
      await expect(
        other.chat.send(h.tenant.ownerScope, { sessionId, message: "me three" }),
      ).rejects.toMatchObject({ code: "CONFLICT" });
      expect(await other.chat.cancel(h.tenant.ownerScope, sessionId)).toEqual({ cancelled: true });
      other.close();
    } finally {
      commands.disconnect();
      subscriber.disconnect();
    }

    const events = await drained;
    expect(events.at(-1)).toMatchObject({ type: "done", status: "cancelled" });
    await stalled!.clientAborted;
    // The lock is free again: the next turn runs.
    fake.enqueue({ kind: "text", text: "ok" });
    const next = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "now" }));
    expect(next.at(-1)).toMatchObject({ type: "done", status: "completed" });
    const history = await h.owner.chat.history({ ...h.ref, sessionId });
    expect(history.map((message) => message.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });

  it("cancel through the API stops a running turn; with no turn it reports false", async () => {
    const sessionId = await newSession();
    expect(await h.owner.chat.cancel({ ...h.ref, sessionId })).toEqual({ cancelled: false });
    fake.enqueue({ kind: "stall" });
    const requestsBefore = fake.requests.length;
    const drained = collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "wait" }));
    await fake.waitForRequests(requestsBefore + 1);
    expect(await h.owner.chat.cancel({ ...h.ref, sessionId })).toEqual({ cancelled: true });
    expect((await drained).at(-1)).toMatchObject({ type: "done", status: "cancelled" });

    // Turns and cancels are audited with their outcome (the buffer is normally drained by audit.flush).
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, limit: 200 });
    const ofSession = items.filter(
      (entry) => entry.targetId === sessionId && entry.action.startsWith("chat."),
    );
    expect(ofSession.map((entry) => `${entry.action}:${entry.outcome}`).sort()).toEqual([
      "chat.cancel:success",
      "chat.cancel:success",
      "chat.send:success",
    ]);
    expect(ofSession.find((entry) => entry.action === "chat.send")?.details).toMatchObject({
      status: "cancelled",
    });
    expect(JSON.stringify(ofSession)).not.toContain("wait");
  });

  it("AgentCreate runs a worker session that shares the leader's workspace and belongs to its team", async () => {
    const sessionId = await newSession();
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          {
            id: "c_team",
            name: "AgentCreate",
            arguments: { name: "helper", description: "Writes files", prompt: "write team.txt" },
          },
        ],
      },
      {
        kind: "tool-calls",
        calls: [{ id: "c_w", name: "Bash", arguments: { command: "echo TEAM > team.txt && echo ok" } }],
      },
      { kind: "text", text: "helper finished" },
      { kind: "text", text: "All done" },
    );
    const before = fake.requests.length;
    const events = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "use a helper" }));
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    const teamResult = events.find(
      (event) => event.type === "tool-result" && event.toolName === "AgentCreate",
    );
    expect(teamResult).toMatchObject({ isError: false });
    expect((teamResult as { output: string }).output).toContain("helper finished");
    const workerSessionId = (teamResult as unknown as { metadata: { memberSessionId: string } }).metadata
      .memberSessionId;

    const leader = await h.owner.session.get({ ...h.ref, sessionId });
    const worker = await h.owner.session.get({ ...h.ref, sessionId: workerSessionId });
    expect(worker).toMatchObject({ leaderSessionId: sessionId, workspaceId: leader.workspaceId });
    const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, sessionId);
    expect(await fs.readFile(path.join(hostWorkdirOf(workspace), "team.txt"), "utf8")).toBe("TEAM\n");
    const toolsOf = (index: number) => fake.requests[index]!.tools.map((tool) => tool.function.name);
    expect(toolsOf(before)).toContain("AgentCreate");
    expect(toolsOf(before + 1)).not.toContain("AgentCreate"); // members do not lead teams
  });

  it("viewers cannot send", async () => {
    const sessionId = await newSession();
    expect(await rejectionCode(h.viewer.chat.send({ ...h.ref, sessionId, message: "hi" }))).toBe("FORBIDDEN");
  });
});
