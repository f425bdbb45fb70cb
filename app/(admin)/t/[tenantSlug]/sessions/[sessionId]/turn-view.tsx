"use client";

import { AlertTriangle, Ban, Loader2 } from "lucide-react";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { ChatRow, MessageText } from "./message-view";
import { type ChatContext, OffloadLink, ToolCallCard } from "./tool-views";
import type { LiveTurn, TurnError } from "./use-chat-turn";

/** The error of a failed turn, in words, with what to do about it. */
export function TurnErrorView({ error }: { error: TurnError }) {
  return (
    <Alert data-testid="turn-error">
      <p className="font-medium">The turn failed: {error.message}</p>
      <p className="mt-1 text-xs opacity-80">
        {error.code.toLowerCase().replace(/_/g, " ")}
        {error.retryable ? " · temporary: sending again may work" : ""}
      </p>
    </Alert>
  );
}

/** Tokens and steps of a finished turn, or that it was cancelled. */
export function TurnSummary({ turn }: { turn: LiveTurn }) {
  return (
    <div
      className="text-muted-foreground flex flex-wrap items-center gap-2 text-xs"
      data-testid="turn-summary"
    >
      {turn.status === "cancelled" && (
        <Badge tone="warning" data-testid="turn-cancelled">
          <Ban /> cancelled
        </Badge>
      )}
      {turn.status === "interrupted" && (
        <Badge tone="warning" data-testid="turn-interrupted">
          <AlertTriangle /> interrupted
        </Badge>
      )}
      {turn.status === "failed" && (
        <Badge tone="danger">
          <AlertTriangle /> failed
        </Badge>
      )}
      {turn.usage && (
        <span data-testid="turn-usage">
          {turn.usage.inputTokens.toLocaleString()} in · {turn.usage.outputTokens.toLocaleString()} out ·{" "}
          {turn.usage.totalTokens.toLocaleString()} tokens
        </span>
      )}
      {turn.steps !== null && (
        <span>
          · {turn.steps} step{turn.steps === 1 ? "" : "s"}
        </span>
      )}
    </div>
  );
}

/** The turn as it streams: the user's message, then text and tool calls as they arrive. */
export function LiveTurnView({ turn, ctx }: { turn: LiveTurn; ctx: ChatContext }) {
  const streaming = turn.phase === "streaming";
  return (
    <>
      <ChatRow role="user" meta="now" testId="live-user-message">
        <MessageText text={turn.userMessage} />
      </ChatRow>
      <ChatRow
        role="assistant"
        testId="live-turn"
        meta={
          streaming ? (
            <span className="inline-flex items-center gap-1" data-testid="turn-streaming">
              <Loader2 className="size-3 animate-spin" /> working…
            </span>
          ) : null
        }
      >
        {turn.items.length === 0 && streaming && (
          <span className="text-muted-foreground inline-flex gap-1" aria-label="Waiting for the model">
            <span className="bg-muted-foreground/60 size-1.5 animate-bounce rounded-full" />
            <span className="bg-muted-foreground/60 size-1.5 animate-bounce rounded-full [animation-delay:150ms]" />
            <span className="bg-muted-foreground/60 size-1.5 animate-bounce rounded-full [animation-delay:300ms]" />
          </span>
        )}
        {turn.items.map((item, index) => {
          switch (item.kind) {
            case "text":
              return (
                <div key={index} data-testid="live-text">
                  <MessageText text={item.text} />
                </div>
              );
            case "tool":
              return (
                <ToolCallCard
                  key={item.toolCallId}
                  ctx={ctx}
                  toolName={item.toolName}
                  toolCallId={item.toolCallId}
                  input={item.input}
                  running={streaming}
                  defaultOpen
                  {...(item.result
                    ? {
                        result: {
                          output: item.result.output,
                          isError: item.result.isError,
                          ...(item.result.offloadedTo ? { offloadedTo: item.result.offloadedTo } : {}),
                          ...(item.result.metadata ? { metadata: item.result.metadata } : {}),
                        },
                      }
                    : {})}
                />
              );
            case "offload":
              return (
                <div key={index} className="text-muted-foreground flex items-center gap-2 text-xs">
                  Older history ({item.event.messageCount ?? "some"} messages) was compacted:
                  <OffloadLink ctx={ctx} reference={item.event.reference} bytes={item.event.bytes} />
                </div>
              );
          }
        })}
        {turn.error && <TurnErrorView error={turn.error} />}
        {turn.phase === "done" && <TurnSummary turn={turn} />}
      </ChatRow>
    </>
  );
}
