"use client";

import { Bot, Undo2, User } from "lucide-react";
import { type ReactNode, useState } from "react";
import { Badge } from "@/app/_components/ui/badge";
import { CodeBlock } from "@/app/_components/ui/code-block";
import { cn } from "@/app/_components/ui/cn";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { type ChatContext, StoredToolResult, ToolCallCard } from "./tool-views";

/**
 * One stored chat message. `content` is an AI SDK model message's content as stored (a string, or parts:
 * text, reasoning, tool-call, tool-result, files); anything unexpected is shown as JSON rather than
 * dropped, so the page never hides what the history holds.
 */
type Part = Record<string, unknown> & { type?: unknown };

/** A part's field as text: strings as they are, anything else as JSON (a malformed part still shows). */
const asText = (value: unknown): string =>
  typeof value === "string" ? value : value == null ? "" : (JSON.stringify(value, null, 2) ?? "");

/** Longer texts show this many characters until expanded (a pasted log must not bury the chat). */
const COLLAPSED_CHARS = 3_000;

export function MessageText({ text }: { text: string }) {
  const [expanded, setExpanded] = useState(false);
  const long = text.length > COLLAPSED_CHARS;
  return (
    <div className="flex flex-col items-start gap-1" data-testid="message-text">
      <p className="leading-relaxed break-words whitespace-pre-wrap">
        {long && !expanded ? `${text.slice(0, COLLAPSED_CHARS)}…` : text}
      </p>
      {long && (
        <button
          type="button"
          className="text-muted-foreground hover:text-foreground text-xs underline"
          onClick={() => setExpanded(!expanded)}
          aria-expanded={expanded}
        >
          {expanded ? "Show less" : `Show all ${text.length.toLocaleString()} characters`}
        </button>
      )}
    </div>
  );
}

function PartView({ part, ctx }: { part: Part; ctx: ChatContext }) {
  switch (part.type) {
    case "text":
      return <MessageText text={asText(part.text)} />;
    case "reasoning":
      return (
        <details className="text-muted-foreground text-xs">
          <summary className="cursor-pointer">Reasoning</summary>
          <MessageText text={asText(part.text)} />
        </details>
      );
    case "tool-call":
      return (
        <ToolCallCard
          ctx={ctx}
          toolName={asText(part.toolName)}
          toolCallId={asText(part.toolCallId)}
          input={part.input}
        />
      );
    case "tool-result":
      return (
        <StoredToolResult
          ctx={ctx}
          toolName={asText(part.toolName)}
          toolCallId={asText(part.toolCallId)}
          output={part.output}
        />
      );
    default:
      return <CodeBlock value={part} />;
  }
}

export type HistoryMessage = {
  id: string;
  role: string;
  content: unknown;
  toolCalls: unknown;
  createdAt: Date;
  /** A revert to an earlier turn undid this message's turn: still shown, dimmed and marked. */
  reverted?: boolean;
};

/** The frame of a chat row: who speaks (avatar, name, time), then what they said. */
export function ChatRow({
  role,
  meta,
  children,
  testId = "chat-message",
  reverted = false,
}: {
  role: string;
  meta?: ReactNode;
  children: ReactNode;
  testId?: string;
  reverted?: boolean;
}) {
  const isUser = role === "user";
  const isTool = role === "tool";
  return (
    <li
      // Dimmed, not hidden: a reverted turn stays readable (and selectable) in the transcript.
      className={cn("flex gap-3", isTool && "pl-10", reverted && "opacity-60")}
      data-testid={testId}
      data-role={role}
      data-reverted={reverted || undefined}
    >
      {!isTool && (
        <div
          className={cn(
            "mt-0.5 flex size-7 shrink-0 items-center justify-center rounded-full border",
            isUser ? "bg-muted" : "bg-foreground text-background",
          )}
          aria-hidden
        >
          {isUser ? <User className="size-3.5" /> : <Bot className="size-3.5" />}
        </div>
      )}
      <div className="min-w-0 flex-1">
        {!isTool && (
          <div className="mb-1 flex items-baseline gap-2 text-xs">
            <span className="font-medium capitalize">{isUser ? "You" : role}</span>
            <span className="text-muted-foreground inline-flex flex-wrap items-center gap-2">{meta}</span>
            {reverted && (
              <Badge tone="warning" data-testid="reverted-badge">
                <Undo2 /> reverted
              </Badge>
            )}
          </div>
        )}
        <div className="flex flex-col gap-2">{children}</div>
      </div>
    </li>
  );
}

/** `turnActions`: beside the first message of a turn, what the turn changed (turn-changes.tsx). */
export function MessageView({
  message,
  ctx,
  turnActions,
}: {
  message: HistoryMessage;
  ctx: ChatContext;
  turnActions?: ReactNode;
}) {
  const { content } = message;
  return (
    <ChatRow
      role={message.role}
      reverted={message.reverted ?? false}
      meta={
        <>
          <RelativeTime value={message.createdAt} />
          {turnActions}
        </>
      }
    >
      {typeof content === "string" ? (
        <MessageText text={content} />
      ) : Array.isArray(content) ? (
        content.map((part: unknown, index) =>
          part && typeof part === "object" ? (
            <PartView key={index} part={part as Part} ctx={ctx} />
          ) : (
            <CodeBlock key={index} value={part} />
          ),
        )
      ) : (
        <CodeBlock value={content} />
      )}
      {message.toolCalls != null && (
        <details className="text-xs">
          <summary className="text-muted-foreground cursor-pointer">Tool calls (stored separately)</summary>
          <CodeBlock value={message.toolCalls} />
        </details>
      )}
    </ChatRow>
  );
}
