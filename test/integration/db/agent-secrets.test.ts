import { beforeAll, describe, expect, it } from "vitest";
import { decryptSecret, deriveSecretKey, secretKeyFromBytes } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import {
  createAgent,
  getAgent,
  getAgentModelApiKey,
  listAgents,
  updateAgent,
} from "@/server/modules/agent/agent.data";
import { ZAgentDTO } from "@/server/modules/agent/agent.types";
import { createTestTenant, expectAppError, type TestTenant } from "./fixtures";

const key = secretKeyFromBytes(Buffer.alloc(32, 7));
const providerKey = "sk-live-THIS-MUST-NEVER-LEAK-0123456789";

describe("agent model API keys are encrypted at rest and never returned", () => {
  let t: TestTenant;
  let agentId: string;

  beforeAll(async () => {
    t = await createTestTenant();
    const agent = await createAgent(
      t.scope,
      {
        name: "coder",
        description: "writes code",
        modelConfig: { provider: "openai-compatible", model: "gpt-x", baseUrl: "http://127.0.0.1:9/v1" },
        modelApiKey: providerKey,
        defaultMcpConfigs: [
          { name: "fs", is_stateful: true, mcp_config: { type: "stdio_mcp", command: "mcp-fs" } },
        ],
        defaultSkills: [{ kind: "inline", name: "git", description: "uses git", instructions: "Commit." }],
        isolationPolicy: "PER_SESSION",
      },
      key,
      getDb(),
    );
    agentId = agent.id;
  });

  it("stores AES-GCM ciphertext, not the key", async () => {
    const row = await getDb().agent.findFirstOrThrow({ where: { id: agentId } });
    expect(row.modelApiKeyEncrypted).toMatch(/^v1\./);
    expect(row.modelApiKeyEncrypted).not.toContain(providerKey);
    expect(JSON.stringify(row)).not.toContain(providerKey);
    // Bound to this tenant and agent: the same ciphertext does not open in another context.
    expect(() =>
      decryptSecret(key, row.modelApiKeyEncrypted!, `agent-model-api-key:${t.tenantId}:other`),
    ).toThrow();
  });

  it("round-trips through getAgentModelApiKey with the right key, and fails with a wrong one", async () => {
    expect(await getAgentModelApiKey(t.scope, agentId, key, getDb())).toBe(providerKey);
    await expectAppError(
      getAgentModelApiKey(t.scope, agentId, deriveSecretKey("some-other-secret-value"), getDb()),
      "INTERNAL",
    );
  });

  it("DTOs from get, list, create and update carry only hasModelApiKey", async () => {
    const dtos = [
      await getAgent(t.scope, agentId, getDb()),
      ...(await listAgents(t.scope, undefined, getDb())).items,
    ];
    for (const dto of dtos) {
      expect(JSON.stringify(dto)).not.toContain(providerKey);
      expect(JSON.stringify(dto)).not.toMatch(/v1\.[A-Za-z0-9_-]+\./);
      expect(Object.keys(dto)).not.toContain("modelApiKeyEncrypted");
      expect(ZAgentDTO.strict().parse(dto)).toMatchObject({ hasModelApiKey: true });
    }
    expect(dtos[0]).toMatchObject({
      name: "coder",
      modelConfig: { provider: "openai-compatible", model: "gpt-x" },
      defaultMcpConfigs: [{ name: "fs", is_stateful: true, mcp_config: { command: "mcp-fs", args: [] } }],
      defaultSkills: [{ kind: "inline", name: "git", files: [] }],
      isolationPolicy: "PER_SESSION",
      createdByUserId: t.owner.id,
    });
  });

  it("replaces, keeps and clears the key on update", async () => {
    const renamed = await updateAgent(t.scope, agentId, { description: "still codes" }, key, getDb());
    expect(renamed.hasModelApiKey).toBe(true);
    expect(await getAgentModelApiKey(t.scope, agentId, key, getDb())).toBe(providerKey);

    await updateAgent(t.scope, agentId, { modelApiKey: "sk-rotated" }, key, getDb());
    expect(await getAgentModelApiKey(t.scope, agentId, key, getDb())).toBe("sk-rotated");

    const cleared = await updateAgent(t.scope, agentId, { modelApiKey: null }, key, getDb());
    expect(cleared.hasModelApiKey).toBe(false);
    expect(await getAgentModelApiKey(t.scope, agentId, key, getDb())).toBeNull();
  });

  it("agent names are unique per tenant (CONFLICT)", async () => {
    await expectAppError(
      createAgent(t.scope, { name: "coder", modelConfig: { provider: "p", model: "m" } }, key, getDb()),
      "CONFLICT",
    );
    const other = await createAgent(
      t.scope,
      { name: "reviewer", modelConfig: { provider: "p", model: "m" } },
      key,
      getDb(),
    );
    await expectAppError(updateAgent(t.scope, other.id, { name: "coder" }, key, getDb()), "CONFLICT");
  });
});
