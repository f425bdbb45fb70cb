import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import { createAgent } from "@/server/modules/agent/agent.data";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { sendChat, startAgentApiHarness, type AgentApiHarness } from "./support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * An agent's system prompt is its own field: stored and returned through `agent.*`, sent to the model as the
 * system message (followed by what the workspace adds), while the description stays out of it. The migration
 * that added the field gave existing agents the exact prompt the chat used to build from their description.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;

beforeAll(async () => {
  h = await startAgentApiHarness("sysprompt");
  fake = await startFakeModel({ apiKey: "sk-prompt" });
});

afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

/** The system message of the model request a one-turn chat of `sessionId` makes. */
async function systemMessageOfTurn(sessionId: string): Promise<string> {
  const before = fake.requests.length;
  fake.enqueue({ kind: "text", text: "ok" });
  const events = await sendChat(h.owner, { ...h.ref, sessionId, message: "hi" });
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  const system = fake.requests[before]!.messages.find((message) => message.role === "system");
  expect(typeof system?.content).toBe("string");
  return system!.content as string;
}

describe("agent system prompt", () => {
  it("is stored apart from the description, sent as the system message, and changes with an update", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: "Prompted",
      description: "Shown to people only",
      systemPrompt: "You are a careful reviewer.\nAnswer in one line.",
      modelConfig: { baseUrl: fake.baseUrl, model: "fake", apiKey: "sk-prompt" },
    });
    expect(agent).toMatchObject({
      description: "Shown to people only",
      systemPrompt: "You are a careful reviewer.\nAnswer in one line.",
    });
    const { sessionId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    const first = await systemMessageOfTurn(sessionId);
    expect(first.startsWith("You are a careful reviewer.\nAnswer in one line.")).toBe(true);
    expect(first).not.toContain("Shown to people only");
    // The workspace's instructions follow the agent's prompt.
    expect(first.length).toBeGreaterThan("You are a careful reviewer.\nAnswer in one line.".length);

    const updated = await h.owner.agent.update({
      ...h.ref,
      agentId: agent.id,
      patch: { systemPrompt: "Be terse." },
    });
    expect(updated.systemPrompt).toBe("Be terse.");
    expect((await systemMessageOfTurn(sessionId)).startsWith("Be terse.")).toBe(true);

    // Emptied: the default first sentence, with the agent's name.
    await h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { systemPrompt: "" } });
    expect(
      (await systemMessageOfTurn(sessionId)).startsWith(
        "You are Prompted, an AI agent working in a persistent workspace.",
      ),
    ).toBe(true);
    expect(await h.viewer.agent.get({ ...h.ref, agentId: agent.id })).toMatchObject({ systemPrompt: "" });
  });

  it("refuses a system prompt over 100,000 characters and lets viewers read but not change it", async () => {
    const agent = await h.owner.agent.create({ ...h.ref, name: "Bounded", modelConfig: { model: "m" } });
    await expect(
      h.owner.agent.update({ ...h.ref, agentId: agent.id, patch: { systemPrompt: "x".repeat(100_001) } }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(
      h.viewer.agent.update({ ...h.ref, agentId: agent.id, patch: { systemPrompt: "mine" } }),
    ).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("the migration's backfill gives an agent with a description the prompt the chat used to build from it", async () => {
    const migrations = path.resolve("prisma/migrations");
    const folder = (await fs.readdir(migrations)).find((name) =>
      name.endsWith("_agent_system_prompt_library_tenant_defaults"),
    );
    const sql = await fs.readFile(path.join(migrations, folder!, "migration.sql"), "utf8");
    const backfill = sql.slice(sql.indexOf('UPDATE "agents"')).trim();
    expect(backfill.endsWith(";")).toBe(true);
    const secretKey = secretKeyFromBytes(randomBytes(32));
    const described = await createAgent(
      h.tenant.ownerScope,
      { name: "Legacy", description: "  Keeps the books.\n", modelConfig: { provider: "p", model: "m" } },
      secretKey,
      getDb(),
    );
    const bare = await createAgent(
      h.tenant.ownerScope,
      { name: "Bare", description: " \n", modelConfig: { provider: "p", model: "m" } },
      secretKey,
      getDb(),
    );
    // The statement as the migration ran it, narrowed to these two rows (other test files' agents stay as they are).
    const narrowed = `${backfill.slice(0, -1)} AND "id" IN ('${described.id}', '${bare.id}');`;
    await getDb().$executeRawUnsafe(narrowed);
    const rows = await getDb().agent.findMany({
      where: { id: { in: [described.id, bare.id] } },
      select: { name: true, systemPrompt: true },
      orderBy: { name: "asc" },
    });
    expect(rows).toEqual([
      { name: "Bare", systemPrompt: "" },
      {
        name: "Legacy",
        systemPrompt: "You are Legacy, an AI agent working in a persistent workspace.\nKeeps the books.",
      },
    ]);
  });
});
