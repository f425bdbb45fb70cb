import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ModelMessage } from "ai";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { runTurn } from "@/server/agent/agent-loop";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { createAgentModel } from "@/server/agent/model-provider";
import { offloaderPort } from "@/server/agent/workspace-adapters";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { Offloader } from "@/server/workspace/offload/offloader";
import { createBuiltinTools } from "@/server/workspace/tools";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";

/**
 * A chat turn whose tool calls run the REAL builtin tools on a real local workspace, and whose offloads go
 * through the real workspace offloader. Only the model is scripted.
 */
let fake: FakeModelServer;
let root: string;
let workdir: string;
let backend: HostFolderMachine;

beforeEach(async () => {
  fake = await startFakeModel({ apiKey: "sk-int" });
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-chat-")));
  workdir = path.join(root, "workdir");
  await fs.mkdir(workdir);
  backend = new HostFolderMachine({ workdir });
});

afterEach(async () => {
  await fake.close();
  await backend.close();
  await fs.rm(root, { recursive: true, force: true });
});

describe("a turn on a real local workspace", () => {
  it("Write then Read through the builtin tools, large Bash output offloaded to the workspace", async () => {
    const file = path.join(workdir, "notes", "hello.txt");
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [{ id: "call_w", name: "Write", arguments: { file_path: file, content: "hi there\n" } }],
      },
      { kind: "tool-calls", calls: [{ id: "call_r", name: "Read", arguments: { file_path: file } }] },
      { kind: "tool-calls", calls: [{ id: "call_b", name: "Bash", arguments: { command: "seq 1 5000" } }] },
      { kind: "text", text: "All three tools ran." },
    );
    const agentModel = createAgentModel({ baseUrl: fake.baseUrl, apiKey: "sk-int", model: "fake" });
    const events: TChatTurnEvent[] = [];
    const result = await runTurn({
      sessionId: "sess1",
      model: agentModel.model,
      system: "You are a test agent.",
      history: [],
      userMessage: "write, read, and count",
      tools: createBuiltinTools(backend),
      offloader: offloaderPort(new Offloader(() => backend)),
      limits: { maxRetries: 0 },
      onEvent: (event) => events.push(event),
    });

    expect(result.status).toBe("completed");
    expect(await fs.readFile(file, "utf8")).toBe("hi there\n");
    expect(fake.requests).toHaveLength(4);
    expect(fake.requests[0]!.tools.map((tool) => tool.function.name).sort()).toEqual(
      ["Bash", "Edit", "Glob", "Grep", "Read", "Write"].sort(),
    );
    expect(fake.requests[1]!.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_w" });
    expect(String(fake.requests[1]!.messages.at(-1)!.content)).toContain("has been written successfully");
    expect(fake.requests[2]!.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_r" });
    expect(String(fake.requests[2]!.messages.at(-1)!.content)).toMatch(/1\thi there/);

    const reference = "workspace:///sessions/sess1/tool_result-call_b.txt";
    const bashMessage = String(fake.requests[3]!.messages.at(-1)!.content);
    expect(bashMessage).toContain(`'${reference}'`);
    expect(bashMessage).not.toContain("\n5000");
    const offloaded = await fs.readFile(
      path.join(workdir, "sessions", "sess1", "tool_result-call_b.txt"),
      "utf8",
    );
    expect(offloaded.trim().split("\n")).toHaveLength(5000);
    expect(events).toContainEqual(
      expect.objectContaining({ type: "offload", kind: "tool-result", reference }),
    );
  });

  it("the model can Read the workspace:/// reference an offloaded tool result points it to", async () => {
    const reference = "workspace:///sessions/sess3/tool_result-call_big.txt";
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_big", name: "Bash", arguments: { command: "seq 1 5000" } }] },
      {
        kind: "tool-calls",
        calls: [{ id: "call_ref", name: "Read", arguments: { file_path: reference, offset: 4999 } }],
      },
      { kind: "text", text: "The last line is 5000." },
    );
    const agentModel = createAgentModel({ baseUrl: fake.baseUrl, apiKey: "sk-int", model: "fake" });
    const result = await runTurn({
      sessionId: "sess3",
      model: agentModel.model,
      system: "sys",
      history: [],
      userMessage: "count, then read the end",
      tools: createBuiltinTools(backend),
      offloader: offloaderPort(new Offloader(() => backend)),
      limits: { maxRetries: 0 },
    });
    expect(result.status).toBe("completed");
    expect(String(fake.requests[1]!.messages.at(-1)!.content)).toContain(`'${reference}'`);
    const readBack = fake.requests[2]!.messages.at(-1)!;
    expect(readBack).toMatchObject({ role: "tool", tool_call_id: "call_ref" });
    expect(String(readBack.content)).toBe("  4999\t4999\n  5000\t5000");
  });

  it("compaction appends the old messages to the session's context.jsonl", async () => {
    const history: ModelMessage[] = [];
    for (let index = 0; index < 6; index++) {
      history.push({ role: "user", content: `old request ${index} ${"words ".repeat(50)}` });
      history.push({ role: "assistant", content: `old answer ${index} ${"more ".repeat(50)}` });
    }
    fake.enqueue({ kind: "text", text: "ok" });
    const agentModel = createAgentModel({ baseUrl: fake.baseUrl, apiKey: "sk-int", model: "fake" });
    const result = await runTurn({
      sessionId: "sess2",
      model: agentModel.model,
      system: "sys",
      history,
      userMessage: "continue",
      tools: [],
      offloader: offloaderPort(new Offloader(() => backend)),
      limits: { maxRetries: 0, historyTokenBudget: 500, keepRecentTokens: 200 },
    });

    expect(result.compaction?.reference).toBe("workspace:///sessions/sess2/context.jsonl");
    const lines = (await fs.readFile(path.join(workdir, "sessions", "sess2", "context.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as ModelMessage);
    expect(lines).toEqual(history.slice(0, result.compaction!.replacedCount));
    expect(String(fake.requests[0]!.messages[1]!.content)).toContain(
      "'workspace:///sessions/sess2/context.jsonl'",
    );
  });

  it("cancelling the turn kills a running Bash command", async () => {
    fake.enqueue({
      kind: "tool-calls",
      calls: [
        { id: "call_sleep", name: "Bash", arguments: { command: "echo $$ > sleeper.pid; exec sleep 30" } },
      ],
    });
    const agentModel = createAgentModel({ baseUrl: fake.baseUrl, apiKey: "sk-int", model: "fake" });
    const controller = new AbortController();
    const running = runTurn({
      sessionId: "sess3",
      model: agentModel.model,
      system: "sys",
      history: [],
      userMessage: "sleep",
      tools: createBuiltinTools(backend),
      offloader: offloaderPort(new Offloader(() => backend)),
      signal: controller.signal,
      limits: { maxRetries: 0 },
    });
    const pidFile = path.join(workdir, "sleeper.pid");
    // 30 s: the model's answer and the command's start share two cores with three other test streams (a
    // rehearsal ran past 10 s while every stream was starting).
    const pid = await vi.waitFor(async () => Number((await fs.readFile(pidFile, "utf8")).trim()), {
      timeout: 30_000,
      interval: 20,
    });
    expect(() => process.kill(pid, 0)).not.toThrow();
    controller.abort();
    const result = await running;

    expect(result.status).toBe("cancelled");
    await vi.waitFor(() => expect(() => process.kill(pid, 0)).toThrow(), { timeout: 30_000, interval: 20 });
    expect(fake.requests).toHaveLength(1);
  });
});
