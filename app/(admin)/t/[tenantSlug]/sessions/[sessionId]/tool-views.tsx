"use client";

import { useQuery } from "@tanstack/react-query";
import { BookOpen, ChevronRight, FileArchive, Loader2, Users, Wrench, XCircle } from "lucide-react";
import Link from "next/link";
import { useState } from "react";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { CodeBlock } from "@/app/_components/ui/code-block";
import { cn } from "@/app/_components/ui/cn";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogHeader,
  DialogTitle,
} from "@/app/_components/ui/dialog";
import { useTRPC } from "@/app/_trpc/client";

// Tool names with their own presentation (server/agent/toolkit.ts, team-tools.ts).
const SKILL_TOOL = "Skill";
const TEAM_TOOLS = new Set(["AgentCreate", "AgentInvite"]);

export type ToolResultView = {
  output: unknown;
  isError: boolean;
  offloadedTo?: string;
  metadata?: Record<string, unknown>;
};

export type ChatContext = { tenantSlug: string; workspaceId: string };

/** The one-line gist of a tool's input: the path, pattern, command or skill it is about. */
function inputGist(input: unknown): string | null {
  if (!input || typeof input !== "object") return null;
  const record = input as Record<string, unknown>;
  for (const key of ["name", "file_path", "path", "pattern", "command", "url", "query", "skill"]) {
    const value = record[key];
    if (typeof value === "string" && value) return value.length > 80 ? `${value.slice(0, 77)}…` : value;
  }
  return null;
}

/** Opens an offloaded tool result (or compacted context) from the session's workspace. */
export function OffloadLink({
  ctx,
  reference,
  bytes,
}: {
  ctx: ChatContext;
  reference: string;
  bytes?: number;
}) {
  const trpc = useTRPC();
  const [open, setOpen] = useState(false);
  const file = useQuery({
    ...trpc.workspace.files.read.queryOptions({
      tenantSlug: ctx.tenantSlug,
      workspaceId: ctx.workspaceId,
      path: reference,
      maxBytes: 256 * 1024,
    }),
    enabled: open,
  });
  return (
    <>
      <Button variant="outline" size="sm" onClick={() => setOpen(true)} data-testid="offload-link">
        <FileArchive /> Offloaded {bytes !== undefined ? `(${Math.ceil(bytes / 1024)} KiB)` : ""} — open
      </Button>
      <Dialog open={open} onOpenChange={setOpen}>
        <DialogContent className="max-w-3xl">
          <DialogHeader>
            <DialogTitle>Offloaded content</DialogTitle>
            <DialogDescription className="font-mono text-xs">{reference}</DialogDescription>
          </DialogHeader>
          {file.error ? (
            <p className="text-destructive text-sm">{file.error.message}</p>
          ) : !file.data ? (
            <p className="text-muted-foreground text-sm">Loading…</p>
          ) : (
            <>
              <CodeBlock value={file.data.content} className="max-h-[60vh]" data-testid="offload-content" />
              {file.data.truncated && (
                <p className="text-muted-foreground text-xs">Showing the first 256 KiB.</p>
              )}
            </>
          )}
        </DialogContent>
      </Dialog>
    </>
  );
}

function outputText(output: unknown): { text: unknown; isError: boolean } {
  // Stored results are `{ type: "text" | "json" | "error-text" | "error-json" | "content", value }`.
  if (output && typeof output === "object" && "type" in output && "value" in output) {
    return { text: output.value, isError: String(output.type).startsWith("error") };
  }
  return { text: output, isError: false };
}

/**
 * A tool call with its input and (when it is there) its result: collapsed to one line, expanded on click.
 * Skill reads and team tools say what they did; a team tool links to the worker's session.
 */
export function ToolCallCard({
  ctx,
  toolName,
  toolCallId,
  input,
  result,
  running = false,
  defaultOpen = false,
}: {
  ctx: ChatContext;
  toolName: string;
  toolCallId: string;
  input: unknown;
  result?: ToolResultView;
  running?: boolean;
  defaultOpen?: boolean;
}) {
  const [open, setOpen] = useState(defaultOpen);
  const gist = inputGist(input);
  const isSkill = toolName === SKILL_TOOL;
  const isTeam = TEAM_TOOLS.has(toolName);
  const Icon = isSkill ? BookOpen : isTeam ? Users : Wrench;
  const failed = result?.isError ?? false;
  const memberSessionId =
    typeof result?.metadata?.memberSessionId === "string" ? result.metadata.memberSessionId : null;
  const label = isSkill
    ? "Read skill"
    : isTeam
      ? toolName === "AgentCreate"
        ? "Created team member"
        : "Asked team member"
      : toolName;

  return (
    <div
      className={cn("bg-card rounded-lg border text-sm", failed && "border-destructive/40")}
      data-testid="tool-call"
      data-tool-name={toolName}
    >
      <button
        type="button"
        onClick={() => setOpen(!open)}
        aria-expanded={open}
        className="hover:bg-muted/40 flex w-full cursor-pointer items-center gap-2 rounded-lg px-3 py-2 text-left"
      >
        <ChevronRight
          className={cn("text-muted-foreground size-3.5 shrink-0 transition-transform", open && "rotate-90")}
        />
        <Icon className="text-muted-foreground size-3.5 shrink-0" />
        <span className="font-medium">{label}</span>
        {isSkill || isTeam ? <code className="text-muted-foreground text-xs">{toolName}</code> : null}
        {gist && <code className="text-muted-foreground min-w-0 truncate text-xs">{gist}</code>}
        <span className="ml-auto flex shrink-0 items-center gap-1.5">
          {running && !result && (
            <Badge tone="info">
              <Loader2 className="animate-spin" /> running
            </Badge>
          )}
          {failed && (
            <Badge tone="danger">
              <XCircle /> error
            </Badge>
          )}
          {result?.offloadedTo && <Badge tone="outline">offloaded</Badge>}
        </span>
      </button>
      {memberSessionId && (
        <div className="px-3 pb-2">
          <Link
            className="text-xs font-medium hover:underline"
            href={`/t/${encodeURIComponent(ctx.tenantSlug)}/sessions/${encodeURIComponent(memberSessionId)}`}
            data-testid="worker-session-link"
          >
            Open the worker&apos;s session →
          </Link>
        </div>
      )}
      <div className={cn("grid gap-2 border-t px-3 py-3", !open && "hidden")}>
        <div className="text-muted-foreground flex items-center justify-between text-xs">
          <span>Input</span>
          <code className="font-mono">{toolCallId}</code>
        </div>
        <CodeBlock value={input} data-testid="tool-input" />
        {result && <ToolResultBody ctx={ctx} result={result} />}
      </div>
    </div>
  );
}

function ToolResultBody({ ctx, result }: { ctx: ChatContext; result: ToolResultView }) {
  const { text, isError } = outputText(result.output);
  return (
    <div className="grid gap-2" data-testid="tool-result">
      <span className="text-muted-foreground text-xs">Result</span>
      <CodeBlock value={text} tone={isError || result.isError ? "error" : "default"} />
      {result.offloadedTo && <OffloadLink ctx={ctx} reference={result.offloadedTo} />}
    </div>
  );
}

/** A stored tool result (a `tool` message part) on its own. */
export function StoredToolResult({
  ctx,
  toolName,
  toolCallId,
  output,
}: {
  ctx: ChatContext;
  toolName: string;
  toolCallId: string;
  output: unknown;
}) {
  const [open, setOpen] = useState(false);
  const { text, isError } = outputText(output);
  return (
    <div
      className={cn("bg-card rounded-lg border text-sm", isError && "border-destructive/40")}
      data-testid="tool-result"
    >
      <button
        type="button"
        onClick={() => setOpen(!open)}
        aria-expanded={open}
        className="hover:bg-muted/40 flex w-full cursor-pointer items-center gap-2 rounded-lg px-3 py-2 text-left"
      >
        <ChevronRight
          className={cn("text-muted-foreground size-3.5 transition-transform", open && "rotate-90")}
        />
        <span className="text-muted-foreground">Result of</span>
        <code className="text-xs">{toolName}</code>
        <code className="text-muted-foreground ml-auto truncate text-xs">{toolCallId}</code>
        {isError && <Badge tone="danger">error</Badge>}
      </button>
      <div className={cn("border-t px-3 py-3", !open && "hidden")}>
        <CodeBlock value={text} tone={isError ? "error" : "default"} />
      </div>
      {/* An offload note names its file: offer to open it. */}
      {typeof text === "string" && /offloaded to '([^']+)'/.exec(text) && (
        <div className="px-3 pb-2">
          <OffloadLink ctx={ctx} reference={/offloaded to '([^']+)'/.exec(text)![1]!} />
        </div>
      )}
    </div>
  );
}
