"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ArrowUp, MessagesSquare, Square, Trash2 } from "lucide-react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { type FormEvent, type KeyboardEvent, useCallback, useEffect, useRef, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { CopyableId } from "@/app/_components/ui/copy-button";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RenameButton, RenameDialog } from "@/app/_components/ui/rename-dialog";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Textarea } from "@/app/_components/ui/textarea";
import { useTRPC } from "@/app/_trpc/client";
import { useTenantRole } from "../../_components/tenant-role";
import { sessionDeleteConfirmText, WorkspaceLink } from "../session-ui";
import { CheckpointsProvider } from "./checkpoint-context";
import { HISTORY_PAGE, HistoryPage, type PageStart } from "./history-page";
import { RestoreProgress } from "./restore-progress";
import { SessionEnv } from "./session-env";
import type { ChatContext } from "./tool-views";
import { LiveTurnView, TurnErrorView, TurnSummary } from "./turn-view";
import { placeTurns } from "./turn-markers";
import { type LiveTurn, type SendRefusal, useChatTurn } from "./use-chat-turn";
import { CHAT_MESSAGE_MAX_CHARS } from "@/server/modules/chat/chat.schema";

export function SessionDetail({
  tenantSlug,
  sessionId,
  restoreId,
}: {
  tenantSlug: string;
  sessionId: string;
  /** A restore to follow from the start (a fork's, from the address it was opened at). */
  restoreId: string | null;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const { can, role } = useTenantRole(tenantSlug);
  const me = useQuery(trpc.tenant.me.queryOptions());
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const session = useQuery(trpc.session.get.queryOptions({ tenantSlug, sessionId }));
  const agentId = session.data?.agentId;
  const agent = useQuery({
    ...trpc.agent.get.queryOptions({ tenantSlug, agentId: agentId ?? "" }),
    enabled: agentId !== undefined,
  });
  const firstPage = useQuery(trpc.chat.history.queryOptions({ tenantSlug, sessionId, limit: HISTORY_PAGE }));
  // Each page starts after the previous page's last message (undefined: from the beginning).
  const [pageStarts, setPageStarts] = useState<PageStart[]>([undefined]);
  const turnSummaries = useQuery(trpc.chat.turns.queryOptions({ tenantSlug, sessionId }));
  const [lastTurn, setLastTurn] = useState<LiveTurn | null>(null);
  // The turn that just ended here is summed up below the history (with its error); marked once reloaded.
  const placedTurns = placeTurns(lastTurn ? turnSummaries.data?.slice(0, -1) : turnSummaries.data);
  const [draft, setDraft] = useState("");
  // A risky turn: the workspace is recorded before it runs too (uploads and terminal changes included).
  const [checkpointFirst, setCheckpointFirst] = useState(false);
  // Why the last send did not go (the draft is kept): a turn already running, a message too long, ...
  const [refusal, setRefusal] = useState<SendRefusal | null>(null);
  const endRef = useRef<HTMLDivElement>(null);

  const refreshSession = useCallback(
    () =>
      void queryClient.invalidateQueries({ queryKey: trpc.session.get.queryKey({ tenantSlug, sessionId }) }),
    [queryClient, trpc, tenantSlug, sessionId],
  );
  const { turn, send, cancel, reset, cancelling, streaming } = useChatTurn({
    tenantSlug,
    sessionId,
    // The status badge says "running" while the turn runs.
    onStarted: refreshSession,
    // Sent: the draft is the turn's message now.
    onAccepted: useCallback(() => setDraft(""), []),
    onRefused: setRefusal,
    onSettled: useCallback(
      (final: LiveTurn) => {
        // The turn's messages are stored before `done`: show them from the history, keep the summary.
        void Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.chat.history.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.chat.turns.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          // The turn recorded its checkpoint before it ended: its changes show beside it.
          queryClient.invalidateQueries({ queryKey: trpc.checkpoint.list.pathKey() }),
        ]).then(() => {
          setLastTurn(final);
          reset();
        });
      },
      // `reset` is stable (a useCallback without dependencies), declared after this callback.
      [queryClient, trpc],
    ),
  });

  useEffect(() => {
    endRef.current?.scrollIntoView({ block: "end", behavior: "smooth" });
  }, [turn, lastTurn]);

  const [renaming, setRenaming] = useState(false);
  const rename = useMutation(
    trpc.session.update.mutationOptions({
      // The lists name it too.
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
    }),
  );
  const remove = useMutation(
    trpc.session.delete.mutationOptions({
      onSuccess: async () => {
        toast.success("Session deleted.");
        await Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
        ]);
        router.push(`${base}/sessions`);
      },
    }),
  );

  if (session.error) return <Alert>{session.error.message}</Alert>;
  if (!session.data) return <Skeleton className="h-40 w-full" />;
  const current = session.data;
  const ctx: ChatContext = { tenantSlug, workspaceId: current.workspaceId };
  const canUse = can("session:use", false);
  // A member changes only their own sessions' variables (the server says the same).
  const myUserId = me.data?.principal.kind === "user" ? me.data.principal.userId : undefined;
  const canEditEnv = canUse && (role !== "member" || current.userId === myUserId);
  const historyEmpty = firstPage.data?.length === 0;
  // The server refuses the same (a member reverts and forks only their own sessions).
  const checkpointRefusal = !canUse
    ? "Your role can read this session but not revert or fork it."
    : !canEditEnv
      ? "Only the session's owner or an admin can revert or fork it."
      : null;

  function submit(event?: FormEvent) {
    event?.preventDefault();
    const message = draft.trim();
    if (!message) return;
    if (streaming) {
      // A turn runs (perhaps sent from another tab): one at a time per session; the draft waits here.
      setRefusal({
        code: "CONFLICT",
        message: "A reply is already in progress in this session. Wait for it or cancel it first.",
        retryable: true,
      });
      return;
    }
    if (message.length > CHAT_MESSAGE_MAX_CHARS) {
      setRefusal({
        code: "PAYLOAD_TOO_LARGE",
        message: `Messages are limited to ${CHAT_MESSAGE_MAX_CHARS.toLocaleString()} characters; this one has ${message.length.toLocaleString()}. Shorten it, or put the text in a workspace file and refer to it.`,
        retryable: false,
      });
      return;
    }
    setRefusal(null);
    setLastTurn(null);
    send(message, { checkpointFirst });
    setCheckpointFirst(false);
  }
  function onKeyDown(event: KeyboardEvent<HTMLTextAreaElement>) {
    // Enter sends, Shift+Enter is a new line (IME composition excepted).
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
  }

  return (
    <CheckpointsProvider
      tenantSlug={tenantSlug}
      sessionId={sessionId}
      changeRefusal={checkpointRefusal}
      initialRestoreId={restoreId}
    >
      <div className="flex flex-col">
        <PageHeader
          breadcrumb={
            <Link href={`${base}/sessions`} className="hover:text-foreground">
              ← Sessions
            </Link>
          }
          title={current.name || "Unnamed session"}
          description={
            <span className="flex flex-wrap items-center gap-x-4 gap-y-1" aria-label="Session">
              <span>
                Agent{" "}
                <Link
                  className="text-foreground font-medium hover:underline"
                  href={`${base}/agents/${encodeURIComponent(current.agentId)}`}
                >
                  {agent.data?.name ?? "…"}
                </Link>
              </span>
              <span className="inline-flex items-center gap-1">
                Workspace <WorkspaceLink tenantSlug={tenantSlug} workspaceId={current.workspaceId} />
              </span>
              <StateBadge state={current.status} data-testid="session-status" />
              <span>
                Created <RelativeTime value={current.createdAt} />
              </span>
              <CopyableId value={current.id} />
            </span>
          }
          actions={
            canUse && (
              <div className="flex items-center gap-2">
                {canEditEnv && (
                  <RenameButton ariaLabel="Rename session" onClick={() => setRenaming(true)} showText />
                )}
                <ConfirmDialog
                  title={`Delete session ${current.name || "unnamed"}?`}
                  description={sessionDeleteConfirmText(current)}
                  confirmLabel="Delete session"
                  onConfirm={() => remove.mutateAsync({ tenantSlug, sessionId }).catch(() => {})}
                  trigger={
                    <Button variant="outline" size="sm" disabled={remove.isPending}>
                      <Trash2 className="text-destructive" /> Delete session
                    </Button>
                  }
                />
              </div>
            )
          }
        />
        {remove.error && <Alert className="mb-4">{remove.error.message}</Alert>}
        <RenameDialog
          open={renaming}
          onOpenChange={setRenaming}
          title="Rename this session"
          description="The name the session lists and this page show. Leave it empty to clear it."
          formLabel="Rename session"
          current={current.name}
          maxLength={200}
          save={(name) => rename.mutateAsync({ tenantSlug, sessionId, patch: { name } })}
        />
        <SessionEnv
          tenantSlug={tenantSlug}
          sessionId={sessionId}
          env={current.env}
          agentEnv={agent.data?.env}
          canEdit={canEditEnv}
        />

        <RestoreProgress />
        <section aria-label="Chat" className="bg-card flex flex-col rounded-xl border shadow-xs">
          <ol className="flex min-h-64 flex-col gap-5 p-4 sm:p-6" data-testid="chat-log">
            {historyEmpty && !turn && !lastTurn ? (
              <li>
                <EmptyState
                  icon={MessagesSquare}
                  title="No messages yet"
                  description={
                    canUse ? "Send the first message below." : "Nothing has been said in this session."
                  }
                />
              </li>
            ) : (
              pageStarts.map((start, index) => (
                <HistoryPage
                  key={start?.id ?? "start"}
                  ctx={ctx}
                  sessionId={sessionId}
                  start={start}
                  isLast={index === pageStarts.length - 1}
                  turns={placedTurns}
                  onMore={(last) => setPageStarts((starts) => [...starts, last])}
                />
              ))
            )}
            {turn && <LiveTurnView turn={turn} ctx={ctx} />}
            {!turn && lastTurn && (
              <li className="flex flex-col gap-2 pl-10" data-testid="last-turn">
                {lastTurn.error && <TurnErrorView error={lastTurn.error} />}
                <TurnSummary turn={lastTurn} />
              </li>
            )}
          </ol>
          <div ref={endRef} />
          <div className="bg-card sticky bottom-0 rounded-b-xl border-t p-3 sm:p-4">
            {canUse && refusal && (
              <Alert className="mb-2" data-testid="send-refused">
                <p className="font-medium">Not sent: {refusal.message}</p>
                <p className="mt-1 text-xs opacity-80">Your message is still in the box below.</p>
                {/* The session is gone (deleted, or with its agent): the way back is the sessions list. */}
                {refusal.code === "NOT_FOUND" && (
                  <Link className="mt-1 inline-block text-sm underline" href={`${base}/sessions`}>
                    Back to sessions
                  </Link>
                )}
              </Alert>
            )}
            {canUse ? (
              <form onSubmit={submit} aria-label="Send a message" className="flex items-end gap-2">
                <Textarea
                  aria-label="Message"
                  placeholder={`Message ${agent.data?.name ?? "the agent"}…  (Enter to send, Shift+Enter for a new line)`}
                  value={draft}
                  onChange={(event) => setDraft(event.target.value)}
                  onKeyDown={onKeyDown}
                  rows={1}
                  className="max-h-48 min-h-10 resize-none"
                />
                <label
                  className="text-muted-foreground flex h-10 shrink-0 items-center gap-1.5 text-xs"
                  title="Record the workspace before this turn runs too, so what changed since the last turn (uploads, a terminal) can be restored"
                >
                  <input
                    type="checkbox"
                    checked={checkpointFirst}
                    onChange={(event) => setCheckpointFirst(event.target.checked)}
                    aria-label="Checkpoint first"
                  />
                  Checkpoint first
                </label>
                {streaming ? (
                  <Button
                    variant="outline"
                    onClick={() => void cancel()}
                    disabled={cancelling}
                    aria-label="Cancel turn"
                    className="h-10"
                  >
                    <Square className="fill-current" /> {cancelling ? "Cancelling…" : "Cancel"}
                  </Button>
                ) : (
                  <Button type="submit" aria-label="Send" className="h-10" disabled={!draft.trim()}>
                    <ArrowUp /> Send
                  </Button>
                )}
              </form>
            ) : (
              <p className="text-muted-foreground text-sm" data-testid="chat-read-only">
                Your role can read this session but not send messages.
              </p>
            )}
          </div>
        </section>
      </div>
    </CheckpointsProvider>
  );
}
