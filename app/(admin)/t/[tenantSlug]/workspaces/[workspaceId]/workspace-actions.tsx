"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Square, Trash2 } from "lucide-react";
import { type FormEvent, useEffect, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
} from "@/app/_components/ui/dialog";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { useTRPC } from "@/app/_trpc/client";
import type { WorkspaceState } from "@/server/modules/workspace/workspace.types";
import { useTenantRole } from "../../_components/tenant-role";
import { TRANSITIONAL_STATES } from "../workspace-format";

type Confirming = "stop" | "purge" | null;
/**
 * The last request, the state the workspace was in when it was made and, once it has left that state and
 * its transitions, the state it settled in.
 */
type Requested = {
  kind: "stop" | "purge";
  /** The worker had nothing to do (already stopped, purged or being purged). */
  noop: boolean;
  generation: number;
  atState: WorkspaceState;
  settledIn?: WorkspaceState;
};

/**
 * What the note says: the request while a worker carries it out, then its outcome. A fast worker can
 * finish before the page's next poll, so the outcome must stay readable after the state has settled.
 */
function requestedText(requested: Requested, state: WorkspaceState): string {
  if (requested.noop) {
    return requested.kind === "stop"
      ? `Nothing to stop: the workspace is ${state.toLowerCase()}.`
      : "Already purged (or being purged).";
  }
  const next = requested.generation + 1;
  if (requested.kind === "stop") {
    if (requested.settledIn === "STOPPED") return "Stopped: files stay, and the next use starts it again.";
    if (requested.settledIn) return `The stop ended with the workspace ${requested.settledIn.toLowerCase()}.`;
    return "Stop requested: a worker is stopping the workspace.";
  }
  if (requested.settledIn === "PURGED") {
    return `Generation ${requested.generation} purged: the next use starts generation ${next}, fresh and empty.`;
  }
  if (requested.settledIn) return `The purge ended with the workspace ${requested.settledIn.toLowerCase()}.`;
  return `Purge requested: a worker is deleting generation ${requested.generation}; the next use starts generation ${next}.`;
}

/**
 * Stop and Purge, each behind a confirmation dialog (purge asks for the workspace id to be typed). Both only
 * enqueue a worker job; the page polls until the state shows the outcome. The note says what was requested
 * while the workspace is on its way, then the outcome once it has settled; it goes when the workspace
 * moves on from that state (a later use or action) or another action is opened.
 */
export function WorkspaceActions({
  tenantSlug,
  workspaceId,
  state,
  generation,
  activeLeases,
  onPurgeRequested,
}: {
  tenantSlug: string;
  workspaceId: string;
  state: WorkspaceState;
  generation: number;
  activeLeases: number;
  onPurgeRequested: () => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState<Confirming>(null);
  const [typedId, setTypedId] = useState("");
  const [requested, setRequested] = useState<Requested | null>(null);
  const { role, can } = useTenantRole(tenantSlug);
  const canManage = can("workspace:manage", true);

  useEffect(() => {
    if (!requested || state === requested.atState || TRANSITIONAL_STATES.includes(state)) return;
    if (!requested.settledIn) setRequested({ ...requested, settledIn: state });
    else if (state !== requested.settledIn) setRequested(null);
  }, [state, requested]);

  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.workspace.get.queryKey({ tenantSlug, workspaceId }) }),
      queryClient.invalidateQueries({ queryKey: trpc.workspace.list.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.workspace.events.pathKey() }),
    ]);
  const stop = useMutation(
    trpc.workspace.stop.mutationOptions({
      onSuccess: async (outcome) => {
        setConfirming(null);
        setRequested({ kind: "stop", noop: !outcome.jobId, generation, atState: state });
        await refresh();
      },
    }),
  );
  const purge = useMutation(
    trpc.workspace.purge.mutationOptions({
      onSuccess: async (outcome) => {
        setConfirming(null);
        setTypedId("");
        setRequested({ kind: "purge", noop: !outcome.jobId, generation: outcome.generation, atState: state });
        if (outcome.jobId) onPurgeRequested();
        await refresh();
      },
    }),
  );

  function open(next: Confirming) {
    stop.reset();
    purge.reset();
    setRequested(null);
    setTypedId("");
    setConfirming(next);
  }

  function submit(event: FormEvent<HTMLFormElement>, kind: "stop" | "purge") {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const reason = form.get("reason");
    const input = {
      tenantSlug,
      workspaceId,
      force: form.get("force") === "on",
      ...(typeof reason === "string" && reason.trim() ? { reason: reason.trim() } : {}),
    };
    if (kind === "stop") stop.mutate(input);
    else purge.mutate(input);
  }

  const canStop = state === "READY" || state === "STOPPING";
  const error = stop.error ?? purge.error;
  const pending = stop.isPending || purge.isPending;
  const force = (
    <label className="flex items-center gap-2 text-sm">
      <input type="checkbox" name="force" /> Force, even with {activeLeases} active lease(s)
    </label>
  );

  return (
    <div className="grid gap-3">
      <div className="flex flex-wrap items-center gap-2">
        <Button
          variant="outline"
          disabled={!canManage || !canStop || pending}
          title={canStop ? undefined : `A ${state.toLowerCase()} workspace has nothing to stop.`}
          onClick={() => open("stop")}
        >
          <Square /> Stop…
        </Button>
        <Button
          variant="destructive"
          disabled={!canManage || state === "PURGED" || state === "PURGING" || pending}
          onClick={() => open("purge")}
        >
          <Trash2 /> Purge…
        </Button>
      </div>
      {!canManage && role && (
        <p className="text-muted-foreground text-xs" data-testid="actions-role-note">
          Stopping and purging need the admin role; you are {role}.
        </p>
      )}
      {requested && (
        <Alert tone="success" data-testid="action-result">
          {requestedText(requested, state)}
        </Alert>
      )}

      <Dialog open={confirming === "stop"} onOpenChange={(isOpen) => !isOpen && setConfirming(null)}>
        <DialogContent>
          <form className="grid gap-4" aria-label="Confirm stop" onSubmit={(event) => submit(event, "stop")}>
            <DialogHeader>
              <DialogTitle>Stop this workspace?</DialogTitle>
              <DialogDescription>
                Its machine stops; files, skills and MCP declarations stay. The next use starts it again.
              </DialogDescription>
            </DialogHeader>
            <Field label="Reason">
              <Input name="reason" maxLength={500} placeholder="stop requested by an admin" />
            </Field>
            {force}
            {error && <Alert data-testid="action-error">{error.message}</Alert>}
            <DialogFooter>
              <Button type="button" variant="outline" onClick={() => setConfirming(null)}>
                Cancel
              </Button>
              <Button type="submit" disabled={pending}>
                {stop.isPending ? "Stopping…" : "Confirm stop"}
              </Button>
            </DialogFooter>
          </form>
        </DialogContent>
      </Dialog>

      <Dialog open={confirming === "purge"} onOpenChange={(isOpen) => !isOpen && setConfirming(null)}>
        <DialogContent>
          <form
            className="grid gap-4"
            aria-label="Confirm purge"
            onSubmit={(event) => submit(event, "purge")}
          >
            <DialogHeader>
              <DialogTitle>Purge generation {generation}?</DialogTitle>
              <DialogDescription data-testid="purge-explanation">
                Purging deletes this generation of the workspace: its files, skills, MCP declarations and
                offloaded data, for good. Its sessions keep working: their next use starts generation{" "}
                {generation + 1}, fresh and empty. Type the workspace id to confirm.
              </DialogDescription>
            </DialogHeader>
            <code className="bg-muted rounded px-2 py-1 text-xs break-all">{workspaceId}</code>
            <Field label="Workspace id">
              <Input
                name="confirmId"
                autoComplete="off"
                value={typedId}
                onChange={(event) => setTypedId(event.target.value)}
              />
            </Field>
            <Field label="Reason">
              <Input name="reason" maxLength={500} placeholder="purge requested" />
            </Field>
            {force}
            {error && <Alert data-testid="action-error">{error.message}</Alert>}
            <DialogFooter>
              <Button type="button" variant="outline" onClick={() => setConfirming(null)}>
                Cancel
              </Button>
              <Button type="submit" variant="destructive" disabled={pending || typedId !== workspaceId}>
                {purge.isPending ? "Purging…" : `Purge generation ${generation}`}
              </Button>
            </DialogFooter>
          </form>
        </DialogContent>
      </Dialog>
    </div>
  );
}
