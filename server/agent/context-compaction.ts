import { generateText, type LanguageModel, type ModelMessage, type UserModelMessage } from "ai";
import type { TTurnLimits } from "./agent.schema";
import type { ModelCallSettings } from "./model-provider";
import type { ChatLogger, OffloaderPort } from "./ports";

/**
 * History compaction (the reference's context compression, agentscope-spec.md §4): when the history grows
 * past its token budget, the oldest part is offloaded to `sessions/<sid>/context.jsonl` in the workspace
 * and replaced by ONE stub message carrying the reference and a summary. The summary is built
 * deterministically from the messages (no model call) unless `summarizeCompactedContext` asks the model.
 */
export type Compaction = {
  /** Where the compacted messages were offloaded. */
  reference: string;
  /** How many leading history messages the stub replaces. */
  replacedCount: number;
  /** The message that stands in for them, first in the history from now on. */
  stub: UserModelMessage;
};

/** About 4 characters per token: crude but stable, and budgets only need the order of magnitude. */
export function estimateTokens(messages: readonly ModelMessage[]): number {
  let chars = 0;
  for (const message of messages) chars += JSON.stringify(message.content).length + 8;
  return Math.ceil(chars / 4);
}

/**
 * Where to cut: the kept part must start at a user message, so an assistant tool call is never separated
 * from its tool results (providers reject that). Keeps the longest suffix within `keepRecentTokens`; if even
 * the last user message onward is larger, keeps from that message. Null when there is nothing to cut.
 */
export function planCompaction(history: readonly ModelMessage[], limits: TTurnLimits): number | null {
  if (estimateTokens(history) <= limits.historyTokenBudget) return null;
  const boundaries: number[] = [];
  for (let index = 1; index < history.length; index++) {
    if (history[index]?.role === "user") boundaries.push(index);
  }
  if (boundaries.length === 0) return null;
  for (const boundary of boundaries) {
    if (estimateTokens(history.slice(boundary)) <= limits.keepRecentTokens) return boundary;
  }
  return boundaries[boundaries.length - 1] ?? null;
}

export async function compactHistory(input: {
  sessionId: string;
  history: ModelMessage[];
  limits: TTurnLimits;
  offloader: OffloaderPort;
  model: LanguageModel;
  modelSettings: ModelCallSettings;
  signal: AbortSignal | undefined;
  logger: ChatLogger;
}): Promise<{ history: ModelMessage[]; compaction: Compaction | null }> {
  const cut = planCompaction(input.history, input.limits);
  if (cut === null) return { history: input.history, compaction: null };
  const old = input.history.slice(0, cut);
  const reference = await input.offloader.offloadContext(input.sessionId, old);
  let summary = deterministicSummary(old);
  if (input.limits.summarizeCompactedContext) {
    summary = (await summarizeWithModel(input, old)) ?? summary;
  }
  const stub: UserModelMessage = {
    role: "user",
    content:
      `<system-reminder>The earlier part of this conversation (${old.length} messages) was compacted to keep ` +
      `the context small. The compressed context is offloaded to '${reference}', you can refer to it when ` +
      `needed.\n\n${summary}\n</system-reminder>`,
  };
  return {
    history: [stub, ...input.history.slice(cut)],
    compaction: { reference, replacedCount: cut, stub },
  };
}

const MAX_LISTED_REQUESTS = 10;

/** A summary built from the messages alone: the user's requests, tools used, references, last reply. */
export function deterministicSummary(messages: readonly ModelMessage[]): string {
  const requests: string[] = [];
  const toolCounts = new Map<string, number>();
  const references = new Set<string>();
  let lastReply = "";
  for (const message of messages) {
    const text = messageText(message);
    for (const match of text.matchAll(/'(workspace:\/\/\/[^']+)'/g)) if (match[1]) references.add(match[1]);
    if (message.role === "user" && !text.startsWith("<system-reminder>")) requests.push(clip(text, 200));
    if (message.role === "assistant") {
      if (text.trim() !== "") lastReply = text;
      if (Array.isArray(message.content)) {
        for (const part of message.content) {
          if (part.type === "tool-call")
            toolCounts.set(part.toolName, (toolCounts.get(part.toolName) ?? 0) + 1);
        }
      }
    }
  }
  const lines = ["Summary of the compacted part:"];
  if (requests.length > 0) {
    const shown = requests.slice(-MAX_LISTED_REQUESTS);
    const skipped = requests.length - shown.length;
    lines.push(`- User requests (oldest first${skipped > 0 ? `, ${skipped} earlier ones omitted` : ""}):`);
    for (const request of shown) lines.push(`  - "${request}"`);
  }
  if (toolCounts.size > 0) {
    lines.push(`- Tools used: ${[...toolCounts].map(([name, count]) => `${name} x${count}`).join(", ")}`);
  }
  if (references.size > 0) {
    lines.push(`- Workspace references mentioned: ${[...references].map((ref) => `'${ref}'`).join(", ")}`);
  }
  if (lastReply !== "") lines.push(`- Last assistant reply: "${clip(lastReply, 500)}"`);
  return lines.join("\n");
}

async function summarizeWithModel(
  input: Parameters<typeof compactHistory>[0],
  old: readonly ModelMessage[],
): Promise<string | null> {
  try {
    const transcript = old.map((message) => `[${message.role}] ${messageText(message)}`).join("\n\n");
    const result = await generateText({
      model: input.model,
      ...input.modelSettings,
      maxRetries: input.limits.maxRetries,
      abortSignal: input.signal,
      system:
        "Summarise the conversation transcript below for the assistant that continues it. Keep the user's " +
        "goals, decisions, facts, file paths and open tasks. Be concise; use bullet points.",
      prompt: transcript.slice(0, 200_000),
    });
    const text = result.text.trim();
    return text === "" ? null : `Summary of the compacted part:\n${text}`;
  } catch (error) {
    if (input.signal?.aborted) throw error;
    input.logger.warn({ sessionId: input.sessionId, error: String(error) }, "compaction summary call failed");
    return null;
  }
}

/** The readable text of a message: text parts, tool calls as `name(args)`, tool outputs. */
function messageText(message: ModelMessage): string {
  if (typeof message.content === "string") return message.content;
  const pieces: string[] = [];
  for (const part of message.content) {
    if (part.type === "text") pieces.push(part.text);
    else if (part.type === "tool-call")
      pieces.push(`${part.toolName}(${clip(JSON.stringify(part.input), 300)})`);
    else if (part.type === "tool-result") {
      const value = "value" in part.output ? part.output.value : part.output.type;
      pieces.push(typeof value === "string" ? value : JSON.stringify(value));
    }
  }
  return pieces.join("\n");
}

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max)}…`;
}
