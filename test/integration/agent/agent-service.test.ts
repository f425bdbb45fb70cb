import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import { getDb } from "@/server/db";
import { getAgentModelApiKey } from "@/server/modules/agent/agent.data";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { rejectionCode } from "../api/support/call-by-path";
import { startAgentApiHarness, type AgentApiHarness } from "./support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/** agent.* through the API: the key goes in encrypted and never comes out; delete cascades and purges. */
let h: AgentApiHarness;
const KEY = `sk-${randomUUID()}`;

beforeAll(async () => {
  h = await startAgentApiHarness("agent");
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

describe("agent CRUD", () => {
  it("stores the model API key encrypted and never returns it", async () => {
    const created = await h.owner.agent.create({
      ...h.ref,
      name: `keyed-${randomUUID().slice(0, 8)}`,
      modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "m1", apiKey: KEY },
    });
    expect(created.hasApiKey).toBe(true);
    expect(created.modelConfig).toEqual({
      provider: "openai-compatible",
      baseUrl: "http://127.0.0.1:9/v1",
      model: "m1",
    });
    const reads = [
      created,
      await h.owner.agent.get({ ...h.ref, agentId: created.id }),
      await h.owner.agent.list(h.ref),
      await h.viewer.agent.get({ ...h.ref, agentId: created.id }),
    ];
    for (const read of reads) expect(JSON.stringify(read)).not.toContain(KEY);

    const [row] = await getDb().$queryRaw<{ model_config: unknown; model_api_key_encrypted: string }[]>`
      SELECT model_config, model_api_key_encrypted FROM agents WHERE id = ${created.id}`;
    expect(JSON.stringify(row)).not.toContain(KEY);
    const secretKey = secretKeyFromBytes(getConfig().secrets.encryptionKey);
    expect(await getAgentModelApiKey(h.tenant.ownerScope, created.id, secretKey, processBerth().db)).toBe(
      KEY,
    );

    const renamed = await h.owner.agent.update({
      ...h.ref,
      agentId: created.id,
      patch: { description: "changed", modelApiKey: null },
    });
    expect(renamed).toMatchObject({ description: "changed", hasApiKey: false });
    expect(
      await getAgentModelApiKey(h.tenant.ownerScope, created.id, secretKey, processBerth().db),
    ).toBeNull();
  });

  it("lets viewers read but not change agents, and reports name clashes as CONFLICT", async () => {
    const name = `unique-${randomUUID().slice(0, 8)}`;
    await h.owner.agent.create({ ...h.ref, name, modelConfig: { model: "m" } });
    expect(await rejectionCode(h.owner.agent.create({ ...h.ref, name, modelConfig: { model: "m" } }))).toBe(
      "CONFLICT",
    );
    expect(
      await rejectionCode(
        h.viewer.agent.create({ ...h.ref, name: `${name}-v`, modelConfig: { model: "m" } }),
      ),
    ).toBe("FORBIDDEN");
    expect((await h.viewer.agent.list(h.ref)).items.length).toBeGreaterThan(0);
  });

  it("delete removes the agent's sessions and purges its skill partition and its sessions' offload files", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `doomed-${randomUUID().slice(0, 8)}`,
      modelConfig: { model: "m", baseUrl: "http://127.0.0.1:9/v1" },
    });
    const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, sessionId);
    const source = await fs.mkdtemp(path.join(os.tmpdir(), "berth-skill-"));
    await fs.mkdir(path.join(source, "greet"));
    await fs.writeFile(
      path.join(source, "greet", "SKILL.md"),
      "---\nname: greet\ndescription: Greets\n---\nSay hi.\n",
    );
    await workspace.addSkill(path.join(source, "greet"), agent.id);
    expect((await workspace.listSkills(agent.id)).skills.map((skill) => skill.name)).toEqual(["greet"]);
    // Offload files of two of its sessions, and of another agent's session in the same workspace.
    const second = await h.owner.session.create({ ...h.ref, agentId: agent.id, workspaceId });
    const bystanderAgent = await h.owner.agent.create({
      ...h.ref,
      name: `bystander-${randomUUID().slice(0, 8)}`,
      modelConfig: { model: "m", baseUrl: "http://127.0.0.1:9/v1" },
    });
    const bystander = await h.owner.session.create({ ...h.ref, agentId: bystanderAgent.id, workspaceId });
    for (const id of [sessionId, second.sessionId, bystander.sessionId]) {
      await workspace.offloadContext(id, [{ role: "user", content: `context of ${id}` }]);
      await workspace.offloadToolResult(id, "call_1", `output of ${id}`);
    }
    // Through the backend: the workdir is the sandbox's path, not necessarily a host path.
    const sessionDir = (id: string) => path.posix.join(workspace.workdir, "sessions", id);
    const exists = async (dir: string) => (await workspace.machine.stat(dir)) !== null;
    expect(await exists(sessionDir(sessionId))).toBe(true);

    const result = await h.owner.agent.delete({ ...h.ref, agentId: agent.id });
    expect(result.workspaceIds).toEqual([workspaceId]);
    expect(await rejectionCode(h.owner.agent.get({ ...h.ref, agentId: agent.id }))).toBe("NOT_FOUND");
    expect(await rejectionCode(h.owner.session.get({ ...h.ref, sessionId }))).toBe("NOT_FOUND");

    await vi.waitFor(
      async () => {
        const receipts = await h.owner.workspace.purgeReceipts({
          ...h.ref,
          targetType: "agent",
          targetId: agent.id,
        });
        expect(receipts).toHaveLength(1);
      },
      { timeout: 60_000, interval: 100 },
    );
    expect((await workspace.listSkills(agent.id)).skills).toEqual([]);
    await vi.waitFor(
      async () => {
        expect(await exists(sessionDir(sessionId))).toBe(false);
        expect(await exists(sessionDir(second.sessionId))).toBe(false);
      },
      { timeout: 60_000, interval: 100 },
    );
    expect(await exists(path.posix.join(sessionDir(bystander.sessionId), "context.jsonl"))).toBe(true);
    const sessionReceipts = await h.owner.workspace.purgeReceipts({ ...h.ref, targetType: "session" });
    expect(sessionReceipts.map((receipt) => receipt.targetId)).toEqual(
      expect.arrayContaining([sessionId, second.sessionId]),
    );
    expect(sessionReceipts.map((receipt) => receipt.targetId)).not.toContain(bystander.sessionId);
    await fs.rm(source, { recursive: true, force: true });
  });

  it("audits every agent mutation with its outcome, without the key", async () => {
    const name = `audited-${randomUUID().slice(0, 8)}`;
    const agent = await h.owner.agent.create({
      ...h.ref,
      name,
      modelConfig: { model: "m" },
      modelApiKey: KEY,
    });
    await h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { modelApiKey: `${KEY}-2` } });
    await rejectionCode(h.owner.agent.update({ ...h.ref, agentId: "missing", patch: { description: "x" } }));
    await h.owner.agent.delete({ ...h.ref, agentId: agent.id });
    // The buffer is normally drained by the audit.flush job of the process-wide workers.
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, limit: 200 });
    const ofAgent = items
      .filter((entry) => entry.targetId === agent.id)
      .map((e) => `${e.action}:${e.outcome}`);
    expect(ofAgent.sort()).toEqual(["agent.create:success", "agent.delete:success", "agent.update:success"]);
    expect(
      items.some((e) => e.action === "agent.update" && e.outcome === "failure" && e.targetId === "missing"),
    ).toBe(true);
    expect(JSON.stringify(items)).not.toContain(KEY);
  });
});

describe("agent.update is a partial patch", () => {
  const secretKey = () => secretKeyFromBytes(getConfig().secrets.encryptionKey);
  const keyOf = (agentId: string) =>
    getAgentModelApiKey(h.tenant.ownerScope, agentId, secretKey(), processBerth().db);
  const newKeyedAgent = () =>
    h.owner.agent.create({
      ...h.ref,
      name: `patched-${randomUUID().slice(0, 8)}`,
      description: "before",
      modelConfig: {
        baseUrl: "http://127.0.0.1:9/v1",
        model: "m1",
        temperature: 0.3,
        maxOutputTokens: 512,
        apiKey: KEY,
      },
    });

  it("changing only the model keeps baseUrl, the other settings and the key (which still decrypts)", async () => {
    const agent = await newKeyedAgent();
    const updated = await h.owner.agent.update({
      ...h.ref,
      agentId: agent.id,
      patch: { modelConfig: { model: "m2" } },
    });
    const expectedConfig = {
      provider: "openai-compatible",
      baseUrl: "http://127.0.0.1:9/v1",
      model: "m2",
      temperature: 0.3,
      maxOutputTokens: 512,
    };
    expect(updated).toMatchObject({ description: "before", hasApiKey: true, modelConfig: expectedConfig });
    expect(updated.modelConfig).toEqual(expectedConfig);
    expect((await h.owner.agent.get({ ...h.ref, agentId: agent.id })).modelConfig).toEqual(expectedConfig);
    expect(await keyOf(agent.id)).toBe(KEY);
    expect(JSON.stringify(updated)).not.toContain(KEY);
    expect(JSON.stringify(updated)).not.toMatch(/v1\.[A-Za-z0-9_-]+\./);

    // null removes an optional setting; everything else stays.
    const withoutBase = await h.owner.agent.update({
      ...h.ref,
      agentId: agent.id,
      patch: { modelConfig: { baseUrl: null, maxOutputTokens: null } },
    });
    expect(withoutBase.modelConfig).toEqual({ provider: "openai-compatible", model: "m2", temperature: 0.3 });
    expect(await keyOf(agent.id)).toBe(KEY);

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, action: "agent.update", limit: 200 });
    const details = items
      .filter((entry) => entry.targetId === agent.id)
      .map((entry) => entry.details as { fields: string[] });
    expect(details.map((d) => d.fields).sort()).toEqual([
      ["modelConfig.baseUrl", "modelConfig.maxOutputTokens"],
      ["modelConfig.model"],
    ]);
  });

  it("replaces the key when a new one is given and clears it on null, leaving the settings alone", async () => {
    const agent = await newKeyedAgent();
    const rotated = await h.owner.agent.update({
      ...h.ref,
      agentId: agent.id,
      patch: { modelConfig: { apiKey: `${KEY}-new` } },
    });
    expect(rotated.hasApiKey).toBe(true);
    expect(rotated.modelConfig).toEqual(agent.modelConfig);
    expect(await keyOf(agent.id)).toBe(`${KEY}-new`);

    const cleared = await h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { modelApiKey: null } });
    expect(cleared).toMatchObject({ hasApiKey: false, hasModelApiKey: false, description: "before" });
    expect(cleared.modelConfig).toEqual(agent.modelConfig);
    expect(await keyOf(agent.id)).toBeNull();

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const { items } = await h.owner.audit.list({ ...h.ref, action: "agent.update", limit: 200 });
    const ofAgent = items.filter((entry) => entry.targetId === agent.id);
    expect(ofAgent.map((entry) => (entry.details as { fields: string[] }).fields)).toEqual([
      ["modelApiKey"],
      ["modelApiKey"],
    ]);
    expect(JSON.stringify(ofAgent)).not.toContain(KEY);
  });

  it("rejects invalid patches with BAD_REQUEST and changes nothing", async () => {
    const agent = await newKeyedAgent();
    const before = await h.owner.agent.get({ ...h.ref, agentId: agent.id });
    const invalid = [
      { modelConfig: { baseUrl: "not a url" } },
      { modelConfig: { model: null } },
      { modelConfig: { model: "m2", temperature: 7 } },
      // Known keys only, each bounded: arbitrary extra settings once let a 20 MB config in.
      { modelConfig: { reasoningEffort: "low" } },
      { modelConfig: { model: "m".repeat(201) } },
      { modelApiKey: "" },
      { modelApiKey: `${KEY}-a`, modelConfig: { apiKey: `${KEY}-b` } },
      { name: "no/slashes", description: "after" },
    ];
    for (const patch of invalid) {
      expect(
        await rejectionCode(
          h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: patch as { description?: string } }),
        ),
      ).toBe("BAD_REQUEST");
      // The service checks too, with the one AppError type (callers other than tRPC).
      await expect(
        processBerth().agents.agent.update(h.tenant.ownerScope, agent.id, patch as { description?: string }),
      ).rejects.toMatchObject({ name: "AppError", code: "BAD_REQUEST" });
    }
    expect(await h.owner.agent.get({ ...h.ref, agentId: agent.id })).toEqual(before);
    expect(await keyOf(agent.id)).toBe(KEY);
  });
});
