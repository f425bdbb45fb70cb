import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import type { TAgentCreateRequest } from "@/server/modules/agent/agent.schema";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { rejectionCode } from "../api/support/call-by-path";
import { collect, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * Image reads through chat.send: the agent's model config says which media types the model accepts; Read
 * attaches such a file, and the model receives it as an image part (in a user message after the tool
 * result, since OpenAI-style APIs take only text in tool messages). Only the model is the loopback fake.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
// A 1×1 PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

beforeAll(async () => {
  h = await startAgentApiHarness("images");
  fake = await startFakeModel();
});
afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

async function agentWith(name: string, acceptedMediaTypes?: string[]) {
  // Typed loosely on purpose: the last test sends types the schema refuses.
  return h.owner.agent.create({
    ...h.ref,
    name,
    modelConfig: {
      baseUrl: fake.baseUrl,
      model: "fake-vision",
      ...(acceptedMediaTypes ? { acceptedMediaTypes } : {}),
    } as TAgentCreateRequest["modelConfig"],
  });
}

/** A session of the agent with `pixel.png` in its workspace, and one turn that Reads it. */
async function readPixelTurn(agentId: string) {
  const { sessionId } = await h.owner.session.create({ ...h.ref, agentId });
  const { workspace } = await h.workspace.service.resolveForSession(h.tenant.ownerScope, sessionId);
  const file = path.posix.join(workspace.workdir, "pixel.png");
  await workspace.machine.writeFile(file, PNG);
  const before = fake.requests.length;
  fake.enqueue(
    { kind: "tool-calls", calls: [{ id: "c_read", name: "Read", arguments: { file_path: file } }] },
    { kind: "text", text: "A single pixel." },
  );
  const events = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "look at it" }));
  return { sessionId, events, requests: fake.requests.slice(before) };
}

type WireMessage = { role: string; content: unknown };
const imagePartsOf = (messages: WireMessage[]) =>
  messages.flatMap((message) =>
    Array.isArray(message.content)
      ? (message.content as { type: string; image_url?: { url: string } }[])
          .filter((part) => part.type === "image_url")
          .map((part) => ({ role: message.role, url: part.image_url!.url }))
      : [],
  );

describe("image reads in chat", () => {
  it("a model that accepts image/png receives the Read image as an image part; the stored history keeps only text", async () => {
    const agent = await agentWith("Vision", ["image/png", "image/jpeg"]);
    const { sessionId, events, requests } = await readPixelTurn(agent.id);
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    expect(events.find((event) => event.type === "tool-result")).toMatchObject({ isError: false });

    const second = requests[1]!.messages as WireMessage[];
    const toolIndex = second.findIndex((message) => message.role === "tool");
    expect(String(second[toolIndex]!.content)).toContain("image/png");
    expect(second[toolIndex + 1]).toMatchObject({ role: "user" });
    expect(imagePartsOf(second)).toEqual([
      { role: "user", url: `data:image/png;base64,${PNG.toString("base64")}` },
    ]);

    const history = await h.owner.chat.history({ ...h.ref, sessionId });
    expect(JSON.stringify(history)).not.toContain(PNG.toString("base64"));
  });

  it("a model without accepted media types gets the Read refusal and no image", async () => {
    const agent = await agentWith("Text-only");
    const { events, requests } = await readPixelTurn(agent.id);
    expect(events.find((event) => event.type === "tool-result")).toMatchObject({ isError: true });
    expect(imagePartsOf(requests[1]!.messages as WireMessage[])).toEqual([]);
  });

  it("accepted media types are validated: unknown types and repeats are refused", async () => {
    expect(await rejectionCode(agentWith("Bad-type", ["image/bmp"]))).toBe("BAD_REQUEST");
    expect(await rejectionCode(agentWith("Repeated", ["image/png", "image/png"]))).toBe("BAD_REQUEST");
    const agent = await agentWith("Patched");
    const patched = await h.owner.agent.update({
      ...h.ref,
      agentId: agent.id,
      patch: { modelConfig: { acceptedMediaTypes: ["application/pdf"] } },
    });
    expect(patched.modelConfig).toMatchObject({ acceptedMediaTypes: ["application/pdf"] });
  });
});
