import type { ModelMessage, UserModelMessage } from "ai";
import type { AgentToolResult } from "./ports";

export type ToolAttachment = NonNullable<AgentToolResult["attachments"]>[number];

/**
 * Attachments of tool results (an image or PDF the Read tool returned for a model that accepts it) go to
 * the model as file parts of a user message right after the tool results, not inside them: OpenAI-style
 * chat APIs take only text in `tool` messages and reject images there, while every model that accepts
 * images takes them in a user message (the reference's OpenAI formatter promotes tool-result images the
 * same way). Their bytes live only in the request: the stored conversation keeps the tool's text.
 */
export class ToolAttachmentRelay {
  private readonly pending = new Map<string, { toolName: string; attachments: ToolAttachment[] }>();

  /** Called by a tool's execute with what it returned. */
  hold(toolCallId: string, toolName: string, attachments: readonly ToolAttachment[] | undefined): void {
    if (attachments && attachments.length > 0)
      this.pending.set(toolCallId, { toolName, attachments: [...attachments] });
  }

  /**
   * The messages for the next model call with each held attachment placed after the tool message that
   * carries its result, or undefined when nothing is held (the AI SDK then sends its own messages). The
   * SDK carries the returned messages forward to later steps, so each attachment is sent in once.
   */
  promote(messages: readonly ModelMessage[]): ModelMessage[] | undefined {
    if (this.pending.size === 0) return undefined;
    const out: ModelMessage[] = [];
    let changed = false;
    for (const message of messages) {
      out.push(message);
      if (message.role !== "tool") continue;
      const content: Exclude<UserModelMessage["content"], string> = [];
      for (const part of message.content) {
        if (part.type !== "tool-result") continue;
        const held = this.pending.get(part.toolCallId);
        if (!held) continue;
        this.pending.delete(part.toolCallId);
        content.push({
          type: "text",
          text: `The ${held.toolName} result ${part.toolCallId} attached ${held.attachments.length} file(s):`,
        });
        for (const attachment of held.attachments) {
          content.push({
            type: "file",
            mediaType: attachment.mediaType,
            data: attachment.base64,
            ...(attachment.name ? { filename: attachment.name } : {}),
          });
        }
      }
      if (content.length > 0) {
        out.push({ role: "user", content });
        changed = true;
      }
    }
    return changed ? out : undefined;
  }
}
