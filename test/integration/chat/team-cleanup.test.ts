import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { inviteHandle } from "@/server/agent/team-tools";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { rejectionCode } from "../api/support/call-by-path";
import { collect, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Team workers made by `AgentCreate` live and die with their leader: deleting the leader session (or the
 * leader's agent) deletes the worker agents and purges their skill partitions, audited; an agent that was
 * only invited (`AgentInvite`) stays. Real Postgres, Redis, workers and workspaces; only the model is fake.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
let skillSource: string;

beforeAll(async () => {
  h = await startAgentApiHarness("team");
  fake = await startFakeModel({ apiKey: "sk-team" });
  skillSource = await fs.mkdtemp(path.join(os.tmpdir(), "berth-team-skill-"));
  await fs.mkdir(path.join(skillSource, "notes"));
  await fs.writeFile(
    path.join(skillSource, "notes", "SKILL.md"),
    "---\nname: notes\ndescription: Takes notes\n---\nWrite notes.\n",
  );
});

afterAll(async () => {
  await fs.rm(skillSource, { recursive: true, force: true });
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const newAgent = (prefix: string) =>
  h.owner.agent.create({
    ...h.ref,
    name: `${prefix}-${randomUUID().slice(0, 8)}`,
    description: `${prefix} agent`,
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-team" },
  });

type ToolResult = {
  type: "tool-result";
  toolName: string;
  isError: boolean;
  metadata?: Record<string, string>;
};

/** Runs one leader turn in which the leader calls AgentCreate (and AgentInvite when `invitee` is given). */
async function teamTurn(leaderSessionId: string, invitee?: { id: string; name: string }) {
  fake.enqueue(
    {
      kind: "tool-calls",
      calls: [
        {
          id: "c_create",
          name: "AgentCreate",
          arguments: { name: "scribe", description: "Takes notes", prompt: "take notes" },
        },
      ],
    },
    { kind: "text", text: "notes taken" },
  );
  if (invitee) {
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          {
            id: "c_invite",
            name: "AgentInvite",
            arguments: { target: inviteHandle(invitee), prompt: "review" },
          },
        ],
      },
      { kind: "text", text: "reviewed" },
    );
  }
  fake.enqueue({ kind: "text", text: "team done" });
  const events = await collect(
    await h.owner.chat.send({ ...h.ref, sessionId: leaderSessionId, message: "work as a team" }),
  );
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  const results = events.filter((event) => event.type === "tool-result") as unknown as ToolResult[];
  const created = results.find((result) => result.toolName === "AgentCreate");
  expect(created).toMatchObject({ isError: false });
  const invited = results.find((result) => result.toolName === "AgentInvite");
  if (invitee) expect(invited).toMatchObject({ isError: false });
  return {
    workerAgentId: created!.metadata!.memberAgentId!,
    workerSessionId: created!.metadata!.memberSessionId!,
    invitedSessionId: invited?.metadata?.memberSessionId,
  };
}

const listedAgentIds = async () =>
  (await h.owner.agent.list({ ...h.ref, limit: 200 })).items.map((a) => a.id);

async function waitForAgentPurgeReceipt(agentId: string) {
  await vi.waitFor(
    async () => {
      const receipts = await h.owner.workspace.purgeReceipts({
        ...h.ref,
        targetType: "agent",
        targetId: agentId,
      });
      expect(receipts).toHaveLength(1);
    },
    { timeout: 60_000, interval: 100 },
  );
}

describe("team workers are deleted with their leader", () => {
  it("session.delete of the leader deletes the AgentCreate worker (skills purged, audited) but not the invited agent", async () => {
    const [leader, reviewer] = [await newAgent("lead"), await newAgent("reviewer")];
    const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: leader.id });
    const team = await teamTurn(sessionId, reviewer);

    const worker = await h.owner.agent.get({ ...h.ref, agentId: team.workerAgentId });
    expect(worker.createdByLeaderSessionId).toBe(sessionId);
    expect((await h.owner.agent.get({ ...h.ref, agentId: reviewer.id })).createdByLeaderSessionId).toBeNull();
    expect(await listedAgentIds()).toEqual(expect.arrayContaining([team.workerAgentId, reviewer.id]));

    // The worker installs a skill into its own partition of the leader's (shared) workspace.
    const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, sessionId);
    expect(workspace.id).toBe(workspaceId);
    await workspace.addSkill(path.join(skillSource, "notes"), team.workerAgentId);
    expect((await workspace.listSkills(team.workerAgentId)).skills.map((skill) => skill.name)).toEqual([
      "notes",
    ]);

    const deleted = await h.owner.session.delete({ ...h.ref, sessionId });
    expect(deleted.workerAgentIds).toEqual([team.workerAgentId]);
    expect(deleted.sessionIds).toEqual(
      expect.arrayContaining([sessionId, team.workerSessionId, team.invitedSessionId]),
    );

    expect(await rejectionCode(h.owner.agent.get({ ...h.ref, agentId: team.workerAgentId }))).toBe(
      "NOT_FOUND",
    );
    const remaining = await listedAgentIds();
    expect(remaining).not.toContain(team.workerAgentId);
    expect(remaining).toEqual(expect.arrayContaining([leader.id, reviewer.id]));
    expect(await rejectionCode(h.owner.session.get({ ...h.ref, sessionId: team.invitedSessionId! }))).toBe(
      "NOT_FOUND",
    );

    await waitForAgentPurgeReceipt(team.workerAgentId);
    expect((await workspace.listSkills(team.workerAgentId)).skills).toEqual([]);

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, limit: 200 });
    const workerDelete = items.filter(
      (entry) => entry.action === "agent.delete" && entry.targetId === team.workerAgentId,
    );
    expect(workerDelete).toHaveLength(1);
    expect(workerDelete[0]).toMatchObject({
      outcome: "success",
      details: { cause: "leader-session-deleted", leaderSessionId: sessionId, workspaceIds: [workspaceId] },
    });
    expect(items.some((entry) => entry.action === "agent.delete" && entry.targetId === reviewer.id)).toBe(
      false,
    );
    expect(
      items.find((entry) => entry.action === "session.delete" && entry.targetId === sessionId)?.details,
    ).toMatchObject({ workerAgentIds: [team.workerAgentId] });
  });

  it("another team's workers are not offered for AgentInvite", async () => {
    const [leader, bystander] = [await newAgent("lead"), await newAgent("bystander")];
    const first = await h.owner.session.create({ ...h.ref, agentId: leader.id });
    const { workerAgentId } = await teamTurn(first.sessionId);
    const worker = await h.owner.agent.get({ ...h.ref, agentId: workerAgentId });

    const second = await h.owner.session.create({ ...h.ref, agentId: leader.id });
    fake.enqueue({ kind: "text", text: "nothing to do" });
    const before = fake.requests.length;
    await collect(await h.owner.chat.send({ ...h.ref, sessionId: second.sessionId, message: "hi" }));
    const invite = fake.requests[before]!.tools.find((tool) => tool.function.name === "AgentInvite");
    expect(JSON.stringify(invite)).toContain(inviteHandle(bystander));
    expect(JSON.stringify(invite)).not.toContain(inviteHandle(worker));
    await h.owner.session.delete({ ...h.ref, sessionId: first.sessionId });
    await h.owner.session.delete({ ...h.ref, sessionId: second.sessionId });
  });

  it("agent.delete of the leader's agent deletes the workers its sessions created, too", async () => {
    const leader = await newAgent("lead");
    const { sessionId } = await h.owner.session.create({ ...h.ref, agentId: leader.id });
    const { workerAgentId } = await teamTurn(sessionId);

    const result = await h.owner.agent.delete({ ...h.ref, agentId: leader.id });
    expect(result.workerAgentIds).toEqual([workerAgentId]);
    expect(await rejectionCode(h.owner.agent.get({ ...h.ref, agentId: workerAgentId }))).toBe("NOT_FOUND");
    await waitForAgentPurgeReceipt(workerAgentId);

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, action: "agent.delete", limit: 200 });
    expect(items.find((entry) => entry.targetId === workerAgentId)).toMatchObject({
      outcome: "success",
      details: { cause: "leader-agent-deleted", leaderAgentId: leader.id },
    });
  });
});
