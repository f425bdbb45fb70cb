import type { ModelMessage } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { ZTurnLimits } from "@/server/agent/agent.schema";
import {
  compactHistory,
  deterministicSummary,
  estimateTokens,
  planCompaction,
} from "@/server/agent/context-compaction";
import { silentLogger } from "@/server/agent/ports";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, modelFor } from "./support";

const filler = (n: number) => "word ".repeat(n);
const limits = (budget: number, keep: number) =>
  ZTurnLimits.parse({ historyTokenBudget: budget, keepRecentTokens: keep });

function toolRound(index: number): ModelMessage[] {
  return [
    { role: "user", content: `task ${index} ${filler(30)}` },
    {
      role: "assistant",
      content: [{ type: "tool-call", toolCallId: `c${index}`, toolName: "Bash", input: { command: "ls" } }],
    },
    {
      role: "tool",
      content: [
        {
          type: "tool-result",
          toolCallId: `c${index}`,
          toolName: "Bash",
          output: { type: "text", value: filler(30) },
        },
      ],
    },
    { role: "assistant", content: `finished ${index}` },
  ];
}

describe("planCompaction", () => {
  it("returns null within budget", () => {
    const history = toolRound(0);
    expect(planCompaction(history, limits(estimateTokens(history), 10))).toBeNull();
  });

  it("cuts only before a user message, never between a tool call and its result", () => {
    const history = [...toolRound(0), ...toolRound(1), ...toolRound(2)];
    const lastTwoRounds = estimateTokens(history.slice(4));
    const cut = planCompaction(history, limits(100, lastTwoRounds + 1));
    expect(cut).toBe(4);
    expect(history[4]?.role).toBe("user");
  });

  it("keeps at least the last user exchange even when it alone exceeds keepRecentTokens", () => {
    const history = [...toolRound(0), ...toolRound(1)];
    expect(planCompaction(history, limits(10, 5))).toBe(4);
  });

  it("cannot cut a history with no user message after the first", () => {
    const history: ModelMessage[] = [
      { role: "user", content: filler(500) },
      { role: "assistant", content: filler(500) },
    ];
    expect(planCompaction(history, limits(10, 5))).toBeNull();
  });
});

describe("deterministicSummary", () => {
  it("lists requests, tools used, earlier references and the last reply", () => {
    const history: ModelMessage[] = [
      {
        role: "user",
        content:
          "<system-reminder>The compressed context is offloaded to 'workspace:///sessions/s/context.jsonl'</system-reminder>",
      },
      ...toolRound(0),
      { role: "user", content: "make a chart" },
      { role: "assistant", content: "Here is the chart." },
    ];
    const summary = deterministicSummary(history);
    expect(summary).toContain('"task 0');
    expect(summary).toContain('"make a chart"');
    expect(summary).not.toContain('"<system-reminder>');
    expect(summary).toContain("Tools used: Bash x1");
    expect(summary).toContain("'workspace:///sessions/s/context.jsonl'");
    expect(summary).toContain('Last assistant reply: "Here is the chart."');
  });
});

describe("compactHistory with a summarising model call", () => {
  let fake: FakeModelServer | undefined;
  afterEach(async () => fake?.close());

  it("uses the model's summary when asked to", async () => {
    fake = await startFakeModel();
    fake.enqueue({ kind: "text", text: "- The user wants three tasks done." });
    const history = [...toolRound(0), ...toolRound(1), ...toolRound(2)];
    const offloader = new RecordingOffloader();
    const result = await compactHistory({
      sessionId: "s1",
      history,
      limits: ZTurnLimits.parse({
        historyTokenBudget: 100,
        keepRecentTokens: 120,
        summarizeCompactedContext: true,
      }),
      offloader,
      model: modelFor(fake).model,
      modelSettings: {},
      signal: undefined,
      logger: silentLogger,
    });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.stream).toBe(false);
    expect(String(fake.requests[0]!.messages.at(-1)?.content)).toContain("task 0");
    expect(result.history[0]!.content as string).toContain("The user wants three tasks done.");
    expect(result.history[0]!.content as string).toContain("'workspace:///sessions/s1/context.jsonl'");
  });

  it("falls back to the built-in summary when the summarising call fails", async () => {
    fake = await startFakeModel();
    fake.enqueue({ kind: "http-error", status: 400, message: "no" });
    const history = [...toolRound(0), ...toolRound(1)];
    const warnings: string[] = [];
    const result = await compactHistory({
      sessionId: "s1",
      history,
      limits: ZTurnLimits.parse({
        historyTokenBudget: 10,
        keepRecentTokens: 5,
        summarizeCompactedContext: true,
        maxRetries: 0,
      }),
      offloader: new RecordingOffloader(),
      model: modelFor(fake).model,
      modelSettings: {},
      signal: undefined,
      logger: { warn: (_facts, message) => warnings.push(message) },
    });
    expect(result.history[0]!.content as string).toContain("Tools used: Bash x1");
    expect(warnings).toEqual(["compaction summary call failed"]);
  });
});
