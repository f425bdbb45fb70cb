import { modelMessageSchema, type ModelMessage } from "ai";
import { AppError } from "@/server/shared/errors";

/**
 * Chat history as stored (the `ChatMessage` rows: `role` plus JSON `content`) and as the loop needs it
 * (AI SDK `ModelMessage`). Rows are re-validated when loaded, so a bad row fails loudly instead of sending
 * the provider a malformed conversation.
 */
export type StoredChatMessage = { role: ModelMessage["role"]; content: unknown };

export function toStoredMessage(message: ModelMessage): StoredChatMessage {
  // A JSON round trip drops `undefined` fields and turns binary parts into plain JSON, as Postgres would.
  return { role: message.role, content: JSON.parse(JSON.stringify(message.content)) as unknown };
}

export function fromStoredMessages(rows: readonly StoredChatMessage[]): ModelMessage[] {
  return rows.map((row, index) => {
    const parsed = modelMessageSchema.safeParse({ role: row.role, content: row.content });
    if (!parsed.success) {
      throw new AppError("INTERNAL", `Stored chat message ${index} is not a valid model message`, {
        cause: parsed.error,
        userMessage: "The conversation history is damaged.",
        details: { index, role: row.role },
      });
    }
    return parsed.data;
  });
}
