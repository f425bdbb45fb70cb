import type { ModelMessage } from "ai";
import { createAgentModel } from "@/server/agent/model-provider";
import type { AgentTool, OffloaderPort } from "@/server/agent/ports";
import { runTurn, type RunTurnInput } from "@/server/agent/agent-loop";
import { ZChatTurnEvent, type TChatTurnEvent } from "@/server/agent/agent.schema";
import type { FakeModelServer } from "@/test/fixtures/fake-model/server";

/** An offloader that keeps what it was given, so tests can assert the full content went to the workspace. */
export class RecordingOffloader implements OffloaderPort {
  readonly toolResults: Array<{ sessionId: string; toolCallId: string; text: string; reference: string }> =
    [];
  readonly contexts: Array<{ sessionId: string; messages: ModelMessage[]; reference: string }> = [];

  offloadToolResult(sessionId: string, toolCallId: string, text: string): Promise<string> {
    const reference = `workspace:///sessions/${sessionId}/tool_result-${toolCallId}.txt`;
    this.toolResults.push({ sessionId, toolCallId, text, reference });
    return Promise.resolve(reference);
  }

  offloadContext(sessionId: string, messages: ModelMessage[]): Promise<string> {
    const reference = `workspace:///sessions/${sessionId}/context.jsonl`;
    this.contexts.push({ sessionId, messages, reference });
    return Promise.resolve(reference);
  }
}

export function modelFor(fake: FakeModelServer, apiKey = "sk-test") {
  return createAgentModel({ baseUrl: fake.baseUrl, apiKey, model: "fake-model-1" });
}

/** A tool defined inline for a test. */
export function testTool(
  name: string,
  execute: AgentTool["execute"],
  inputSchema: Record<string, unknown> = { type: "object", properties: { text: { type: "string" } } },
): AgentTool {
  return { name, description: `Test tool ${name}`, inputSchema, execute };
}

export function eventTypes(events: readonly TChatTurnEvent[]): string[] {
  return events.map((event) => event.type);
}

/** Event types with runs of the same type collapsed (the number of text deltas depends on chunking). */
export function phases(events: readonly TChatTurnEvent[]): string[] {
  return eventTypes(events).filter((type, index, all) => index === 0 || all[index - 1] !== type);
}

/** A promise with its resolver, for "the tool has started" style hand-offs. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export type TurnOverrides = Partial<RunTurnInput> & { events?: TChatTurnEvent[] };

/** One turn against the fake model with test defaults; events are schema-checked as they arrive. */
export function runTestTurn(fake: FakeModelServer, offloader: RecordingOffloader, overrides: TurnOverrides) {
  const { events = [], ...rest } = overrides;
  return runTurn({
    sessionId: "s1",
    model: modelFor(fake).model,
    system: "You are a test agent.",
    history: [],
    userMessage: "hello",
    tools: [],
    offloader,
    limits: { maxRetries: 0 },
    onEvent: (event) => events.push(ZChatTurnEvent.parse(event)),
    ...rest,
  });
}
