import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { rejectionCode } from "../api/support/call-by-path";
import { startAgentApiHarness, type AgentApiHarness } from "./support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * `agent.testConnection` against the loopback fake model: it sends one tiny completion with the agent's
 * stored URL, model and key, and answers why when it fails (the key rejected, the URL unreachable).
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
const KEY = "sk-check-secret";

beforeAll(async () => {
  h = await startAgentApiHarness("model-check");
  fake = await startFakeModel({ apiKey: KEY });
});

afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const createAgent = async (name: string, baseUrl: string, apiKey?: string) =>
  (
    await h.owner.agent.create({
      ...h.ref,
      name,
      modelConfig: { baseUrl, model: "fake-model", ...(apiKey ? { apiKey } : {}) },
    })
  ).id;

describe("agent.testConnection", () => {
  it("reaches the endpoint with the stored key and model", async () => {
    const agentId = await createAgent("check-ok", fake.baseUrl, KEY);
    fake.enqueue({ kind: "text", text: "OK" });
    const result = await h.owner.agent.testConnection({ ...h.ref, agentId });
    expect(result).toMatchObject({ ok: true, model: "fake-model", baseUrl: fake.baseUrl });
    const request = fake.requests.at(-1)!;
    expect(request.authorization).toBe(`Bearer ${KEY}`);
    expect(request.model).toBe("fake-model");
  });

  it("reports a rejected key in words, without throwing", async () => {
    const agentId = await createAgent("check-bad-key", fake.baseUrl, "sk-wrong");
    const result = await h.owner.agent.testConnection({ ...h.ref, agentId });
    expect(result).toMatchObject({ ok: false, code: "UNPROCESSABLE" });
    expect(result.ok === false && result.message).toContain("rejected the agent's API key (HTTP 401)");
  });

  it("reports an unreachable base URL", async () => {
    // A port that was just free: nothing listens there.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const agentId = await createAgent("check-unreachable", `http://127.0.0.1:${port}/v1`, KEY);
    const result = await h.owner.agent.testConnection({ ...h.ref, agentId });
    expect(result).toMatchObject({ ok: false, code: "UNAVAILABLE" });
    expect(result.ok === false && result.message).toContain("could not be reached");
  });

  it("is for admins: a viewer is refused", async () => {
    const agentId = await createAgent("check-viewer", fake.baseUrl, KEY);
    expect(await rejectionCode(h.viewer.agent.testConnection({ ...h.ref, agentId }))).toBe("FORBIDDEN");
  });
});
