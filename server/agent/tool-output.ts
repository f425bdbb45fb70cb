import { isAppError } from "@/server/shared/errors";
import { replaceUnstorableCharacters } from "@/server/shared/unsafe-strings";
import { safeThrownText } from "./safe-errors";
import type { TTurnLimits } from "./agent.schema";
import type { AgentToolResult, ChatLogger, OffloaderPort } from "./ports";

/**
 * What a tool call hands back to the AI SDK: the text the model will see, plus facts for the turn's
 * events. Large results are offloaded to the workspace first (agentscope-spec.md §4) so one `cat` of a
 * big file cannot flood the context window.
 */
export type ShapedToolOutput = {
  text: string;
  isError: boolean;
  offload?: { reference: string; bytes: number };
  metadata?: Record<string, unknown>;
};

export async function shapeToolOutput(input: {
  sessionId: string;
  toolCallId: string;
  result: AgentToolResult;
  limits: TTurnLimits;
  offloader: OffloaderPort;
  logger: ChatLogger;
}): Promise<ShapedToolOutput> {
  const { result } = input;
  let raw = result.content;
  for (const attachment of result.attachments ?? []) {
    // The bytes themselves follow in a user message (ToolAttachmentRelay); the text says where.
    raw += `\n[attachment${attachment.name ? ` ${attachment.name}` : ""}: ${attachment.mediaType}, ${Math.floor((attachment.base64.length * 3) / 4)} bytes, shown to you right after this result]`;
  }
  // What the model sees is what the turn stores: both without the characters Postgres rejects.
  const { text, note } = storableToolText(raw);
  const shaped = await offloadIfLarge(input, { text, isError: result.isError });
  if (result.metadata) shaped.metadata = result.metadata;
  if (note) shaped.text += note;
  return shaped;
}

/**
 * `text` with NUL bytes and unpaired surrogates replaced by U+FFFD (Postgres stores neither) and, when any
 * were, the note that tells the model so: a binary output must not read as text that merely looks odd.
 * U+FFFD rather than a visible `\u0000`: it is what the UTF-8 decoding of the output already put in place of
 * the other undecodable bytes, it keeps one character per character, and `\u0000` could be real text.
 */
function storableToolText(raw: string): { text: string; note: string } {
  const { text, nul, surrogates } = replaceUnstorableCharacters(raw);
  const replaced = [
    ...(nul > 0 ? [`${nul} NUL byte(s) replaced with U+FFFD: output is binary or contains NUL`] : []),
    ...(surrogates > 0 ? [`${surrogates} unpaired UTF-16 surrogate(s) replaced with U+FFFD`] : []),
  ];
  return { text, note: replaced.length > 0 ? `\n[Berth: ${replaced.join("; ")}]` : "" };
}

/** Large results are offloaded to the workspace first, the model shown a preview and where the rest is. */
async function offloadIfLarge(
  input: Parameters<typeof shapeToolOutput>[0],
  shaped: ShapedToolOutput,
): Promise<ShapedToolOutput> {
  const { limits } = input;
  const text = shaped.text;
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= limits.toolResultOffloadBytes) return shaped;

  const preview = text.slice(0, limits.toolResultPreviewChars);
  try {
    const reference = await input.offloader.offloadToolResult(input.sessionId, input.toolCallId, text);
    shaped.text =
      `${preview}\n<<<TRUNCATED>>>\n<system-reminder>The tool result (${bytes} bytes) was too large for the ` +
      `context and was offloaded to '${reference}'. Only the first ${preview.length} characters are shown ` +
      `above. You can refer to the file for the truncated content if needed.</system-reminder>`;
    shaped.offload = { reference, bytes };
  } catch (error) {
    input.logger.warn(
      {
        sessionId: input.sessionId,
        toolCallId: input.toolCallId,
        error: isAppError(error) ? error.message : String(error),
      },
      "tool result offload failed; truncating instead",
    );
    shaped.text =
      `${preview}\n<<<TRUNCATED>>>\n<system-reminder>The tool result (${bytes} bytes) was too large for the ` +
      `context and could not be saved to the workspace; only the first ${preview.length} characters are ` +
      `shown.</system-reminder>`;
  }
  return shaped;
}

/** The text the model sees for a tool that threw instead of returning an error result. */
export function thrownToolErrorText(toolName: string, error: unknown): string {
  // Masked like every client-facing error: the model's text reaches the client's tool-result too.
  const { text: message, note } = storableToolText(safeThrownText(error));
  return (message.startsWith("Error") ? message : `Error: ${toolName} failed: ${message}`) + note;
}
