import type { AssistantModelMessage, ModelMessage, ToolModelMessage } from "ai";

/**
 * Collects the messages a turn appends, for persistence. Finished steps come verbatim from the AI SDK
 * (the new tail of `step.response.messages`). The step that was running when the turn was cancelled or failed is rebuilt
 * from what streamed so far, so nothing the user saw is lost: its text, its tool calls, and for every tool
 * call a result (the real one if it finished, else a placeholder, because providers reject a tool call
 * without a result in the next request).
 */
export class StepRecorder {
  private readonly finished: ModelMessage[] = [];
  private partialText = "";
  private partialCalls: Array<{ toolCallId: string; toolName: string; input: unknown }> = [];
  private partialResults = new Map<string, { text: string; isError: boolean }>();

  stepStarted(): void {
    this.resetPartial();
  }

  /** `messages`: the turn's response messages so far (AI SDK 6 hands every step the cumulative list). */
  stepFinished(messages: readonly ModelMessage[]): void {
    this.finished.push(...messages.slice(this.finished.length));
    this.resetPartial();
  }

  text(delta: string): void {
    this.partialText += delta;
  }

  toolCall(toolCallId: string, toolName: string, input: unknown): void {
    this.partialCalls.push({ toolCallId, toolName, input });
  }

  toolResult(toolCallId: string, text: string, isError: boolean): void {
    this.partialResults.set(toolCallId, { text, isError });
  }

  /** Finished steps, plus the interrupted one when `interruptedBecause` is given. */
  messages(interruptedBecause?: string): ModelMessage[] {
    const messages = [...this.finished];
    if (interruptedBecause === undefined) return messages;
    const content: AssistantModelMessage["content"] & unknown[] = [];
    if (this.partialText !== "") content.push({ type: "text", text: this.partialText });
    for (const call of this.partialCalls) {
      content.push({
        type: "tool-call",
        toolCallId: call.toolCallId,
        toolName: call.toolName,
        input: call.input,
      });
    }
    if (content.length > 0) messages.push({ role: "assistant", content });
    if (this.partialCalls.length > 0) {
      const results: ToolModelMessage["content"] = this.partialCalls.map((call) => {
        const result = this.partialResults.get(call.toolCallId);
        return {
          type: "tool-result",
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          output: result
            ? { type: result.isError ? "error-text" : "text", value: result.text }
            : { type: "error-text", value: `The tool call did not finish: ${interruptedBecause}` },
        };
      });
      messages.push({ role: "tool", content: results });
    }
    return messages;
  }

  private resetPartial(): void {
    this.partialText = "";
    this.partialCalls = [];
    this.partialResults = new Map();
  }
}
