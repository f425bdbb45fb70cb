import {
  jsonSchema,
  stepCountIs,
  streamText,
  tool,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  type ToolSet,
  type UserModelMessage,
} from "ai";
import { AppError } from "@/server/shared/errors";
import {
  ZTurnLimits,
  type TChatTurnEvent,
  type TTurnLimits,
  type TTurnLimitsInput,
  type TTurnStatus,
  type TTurnUsage,
} from "./agent.schema";
import { compactHistory, type Compaction } from "./context-compaction";
import { toModelAppError } from "./model-errors";
import type { ModelCallSettings } from "./model-provider";
import { silentLogger, type AgentTool, type ChatLogger, type OffloaderPort } from "./ports";
import { safeErrorMessage } from "./safe-errors";
import { StepRecorder } from "./step-recorder";
import { ToolAttachmentRelay } from "./tool-attachments";
import { shapeToolOutput, thrownToolErrorText, type ShapedToolOutput } from "./tool-output";

/**
 * The agent loop of one chat turn, independent of the web, database and queue layers: it compacts the
 * history if needed, streams the model with the turn's tools (each tool round trip is one step, up to
 * `maxSteps`), offloads large tool results, reports everything as typed events, and returns the messages
 * to persist. It never throws for model or tool failures: those end the turn with an `error` event and a
 * `done` event whose status is "failed". Cancelling `signal` stops the model stream and aborts the tools
 * that are running (they receive the same signal).
 */
export type RunTurnInput = {
  sessionId: string;
  model: LanguageModel;
  modelSettings?: ModelCallSettings;
  /** The full system prompt (base prompt, skills, workspace instructions); see `assembleToolkit`. */
  system: string;
  /** What the model has seen so far (after earlier compactions), oldest first. */
  history: ModelMessage[];
  userMessage: string;
  tools: AgentTool[];
  offloader: OffloaderPort;
  signal?: AbortSignal;
  limits?: TTurnLimitsInput;
  /** Called synchronously for every event, in order; the last one is always `done`. */
  onEvent?: (event: TChatTurnEvent) => void;
  logger?: ChatLogger;
};

export type TurnResult = {
  status: TTurnStatus;
  finishReason: string | null;
  usage: TTurnUsage;
  steps: number;
  /**
   * The user message followed by everything the turn appended (assistant text and tool calls, tool
   * results), in order, ready to persist. A cancelled or failed turn keeps what streamed before it stopped.
   */
  newMessages: ModelMessage[];
  /** Set when the history was compacted first: persist `stub` in place of the first `replacedCount` messages. */
  compaction: Compaction | null;
  error: AppError | null;
};

export async function runTurn(input: RunTurnInput): Promise<TurnResult> {
  const limits = ZTurnLimits.parse(input.limits ?? {});
  const logger = input.logger ?? silentLogger;
  const emit = input.onEvent ?? (() => undefined);
  const userMessage: UserModelMessage = { role: "user", content: input.userMessage };
  const recorder = new StepRecorder();
  const usage: TTurnUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
  let finishReason: string | null = null;
  let steps = 0;
  let compaction: Compaction | null = null;
  let error: AppError | null = null;

  try {
    input.signal?.throwIfAborted();
    const compacted = await compactHistory({
      sessionId: input.sessionId,
      history: input.history,
      limits,
      offloader: input.offloader,
      model: input.model,
      modelSettings: input.modelSettings ?? {},
      signal: input.signal,
      logger,
    }).catch((thrown: unknown) => {
      if (input.signal?.aborted) throw thrown;
      throw new AppError("UNAVAILABLE", `History compaction failed: ${String(thrown)}`, {
        cause: thrown,
        userMessage:
          "The conversation is too long for the model and its older part could not be saved to the workspace. Try again.",
      });
    });
    compaction = compacted.compaction;
    if (compaction) {
      emit({
        type: "offload",
        kind: "context",
        reference: compaction.reference,
        bytes: Buffer.byteLength(JSON.stringify(input.history.slice(0, compaction.replacedCount)), "utf8"),
        messageCount: compaction.replacedCount,
      });
    }

    const attachments = new ToolAttachmentRelay();
    const result = streamText({
      model: input.model,
      ...input.modelSettings,
      system: input.system,
      messages: [...compacted.history, userMessage],
      tools: buildToolSet(input.tools, {
        sessionId: input.sessionId,
        limits,
        offloader: input.offloader,
        logger,
        attachments,
      }),
      prepareStep: ({ messages }) => {
        const promoted = attachments.promote(messages);
        return promoted ? { messages: promoted } : undefined;
      },
      stopWhen: stepCountIs(limits.maxSteps),
      maxRetries: limits.maxRetries,
      abortSignal: input.signal,
      onStepFinish: (step) => recorder.stepFinished(step.response.messages),
      // The default handler prints the whole error (request body included) to the console; errors are
      // reported through the stream's `error` part instead.
      onError: () => undefined,
    });

    for await (const part of result.fullStream) {
      if (part.type === "start-step") {
        recorder.stepStarted();
      } else if (part.type === "text-delta") {
        if (part.text === "") continue;
        recorder.text(part.text);
        emit({ type: "text-delta", text: part.text });
      } else if (part.type === "tool-call") {
        if (!part.invalid) recorder.toolCall(part.toolCallId, part.toolName, part.input);
        emit({ type: "tool-call", toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
      } else if (part.type === "tool-result") {
        const output = part.output as ShapedToolOutput;
        recorder.toolResult(part.toolCallId, output.text, output.isError);
        if (output.offload) {
          emit({
            type: "offload",
            kind: "tool-result",
            reference: output.offload.reference,
            bytes: output.offload.bytes,
            toolCallId: part.toolCallId,
          });
        }
        emit({
          type: "tool-result",
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          output: output.text,
          isError: output.isError,
          ...(output.offload ? { offloadedTo: output.offload.reference } : {}),
          ...(output.metadata ? { metadata: output.metadata } : {}),
        });
      } else if (part.type === "tool-error") {
        // Unknown tool, unparsable arguments or a tool timeout: the SDK reports it to the model itself.
        const text = thrownToolErrorText(part.toolName, part.error);
        recorder.toolResult(part.toolCallId, text, true);
        emit({
          type: "tool-result",
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          output: text,
          isError: true,
        });
      } else if (part.type === "finish-step") {
        steps += 1;
        finishReason = part.finishReason;
        addUsage(usage, part.usage);
      } else if (part.type === "error") {
        error ??= toModelAppError(part.error);
      }
      // Other parts (reasoning, tool-input streaming, sources, ...) are not part of Berth's event stream.
    }
  } catch (thrown) {
    if (!input.signal?.aborted) error ??= toModelAppError(thrown);
  }

  const status: TTurnStatus = input.signal?.aborted ? "cancelled" : error ? "failed" : "completed";
  if (status === "failed" && error) {
    logger.warn({ sessionId: input.sessionId, code: error.code, error: error.message }, "chat turn failed");
    emit({ type: "error", code: error.code, message: safeErrorMessage(error), retryable: error.isRetryable });
  }
  const interruption =
    status === "cancelled" ? "the turn was cancelled" : status === "failed" ? "the turn failed" : undefined;
  emit({ type: "done", status, finishReason, usage: { ...usage }, steps });
  return {
    status,
    finishReason,
    usage,
    steps,
    newMessages: [userMessage, ...recorder.messages(interruption)],
    compaction,
    error: status === "failed" ? error : null,
  };
}

/**
 * The same turn as an async iterable of events (what chat.send streams), plus its result.
 * Breaking out of the iteration does NOT cancel the turn; cancel through `signal`.
 */
export function streamTurn(input: Omit<RunTurnInput, "onEvent">): {
  events: AsyncIterable<TChatTurnEvent>;
  result: Promise<TurnResult>;
} {
  const buffered: TChatTurnEvent[] = [];
  let wake: (() => void) | null = null;
  let finished = false;
  const result = runTurn({
    ...input,
    onEvent: (event) => {
      buffered.push(event);
      wake?.();
    },
  }).finally(() => {
    finished = true;
    wake?.();
  });
  async function* events(): AsyncGenerator<TChatTurnEvent> {
    for (;;) {
      const next = buffered.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (finished) return;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = null;
    }
  }
  return { events: events(), result };
}

type ToolSetContext = {
  sessionId: string;
  limits: TTurnLimits;
  offloader: OffloaderPort;
  logger: ChatLogger;
  /** Where tool results' attachments wait for the next model call (omitted: they are dropped). */
  attachments?: ToolAttachmentRelay;
};

/**
 * Turns port tools into AI SDK tools. The SDK hands each execute the turn's abort signal; each call also
 * gets its own `toolTimeoutMs` deadline: the tool's signal aborts, and a tool that ignores it is given up
 * on, so the model hears of the timeout either way.
 */
function buildToolSet(tools: readonly AgentTool[], context: ToolSetContext): ToolSet {
  const set: ToolSet = {};
  for (const agentTool of tools) {
    set[agentTool.name] = tool({
      description: agentTool.description,
      inputSchema: jsonSchema<unknown>(agentTool.inputSchema),
      execute: async (toolInput: unknown, options): Promise<ShapedToolOutput> => {
        const turnSignal = options.abortSignal;
        const deadline = AbortSignal.timeout(context.limits.toolTimeoutMs);
        const signal = turnSignal ? AbortSignal.any([turnSignal, deadline]) : deadline;
        const timedOut = new Promise<never>((_, reject) =>
          signal.addEventListener(
            "abort",
            () => reject(new Error("tool call aborted", { cause: signal.reason })),
            {
              once: true,
            },
          ),
        );
        timedOut.catch(() => undefined);
        let result;
        try {
          result = await Promise.race([agentTool.execute(toolInput, { signal }), timedOut]);
        } catch (error) {
          if (turnSignal?.aborted) throw error;
          const content = deadline.aborted
            ? `Error: ${agentTool.name} timed out after ${context.limits.toolTimeoutMs} ms`
            : thrownToolErrorText(agentTool.name, error);
          result = { content, isError: true };
        }
        if (!result.isError)
          context.attachments?.hold(options.toolCallId, agentTool.name, result.attachments);
        return shapeToolOutput({ ...context, toolCallId: options.toolCallId, result });
      },
      toModelOutput: ({ output }: { output: ShapedToolOutput }) =>
        output.isError ? { type: "error-text", value: output.text } : { type: "text", value: output.text },
    });
  }
  return set;
}

function addUsage(total: TTurnUsage, step: LanguageModelUsage): void {
  total.inputTokens += step.inputTokens ?? 0;
  total.outputTokens += step.outputTokens ?? 0;
  total.totalTokens += step.totalTokens ?? (step.inputTokens ?? 0) + (step.outputTokens ?? 0);
}
