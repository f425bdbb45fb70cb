"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { useTenantRole } from "../../_components/tenant-role";
import type { WorkspaceState } from "@/server/modules/workspace/workspace.types";

type Confirming = "stop" | "purge" | null;

// Global labels stack their control under the text; a checkbox reads better beside it.
const CHECKBOX_LABEL = { flexDirection: "row", alignItems: "center", paddingBottom: 8 } as const;

/**
 * Stop and Purge, each behind a confirmation (purge asks for the workspace id to be typed). Both only
 * enqueue a worker job; the detail page polls until the state shows the outcome.
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
  const [result, setResult] = useState<string | null>(null);

  // The layout checked membership; the role decides whether the buttons can work at all.
  const { role, can } = useTenantRole(tenantSlug);
  const canManage = can("workspace:manage", true);

  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.workspace.get.queryKey({ tenantSlug, workspaceId }) }),
      queryClient.invalidateQueries({ queryKey: trpc.workspace.list.pathKey() }),
    ]);
  const stop = useMutation(
    trpc.workspace.stop.mutationOptions({
      onSuccess: async (outcome) => {
        setConfirming(null);
        setResult(
          outcome.jobId
            ? "Stop requested: a worker is stopping the workspace."
            : `Nothing to stop: the workspace is ${outcome.state.toLowerCase()}.`,
        );
        await refresh();
      },
    }),
  );
  const purge = useMutation(
    trpc.workspace.purge.mutationOptions({
      onSuccess: async (outcome) => {
        setConfirming(null);
        setTypedId("");
        setResult(
          outcome.jobId
            ? `Purge requested: a worker is deleting generation ${outcome.generation}; the next use starts generation ${outcome.generation + 1}.`
            : "Already purged (or being purged).",
        );
        if (outcome.jobId) onPurgeRequested();
        await refresh();
      },
    }),
  );

  function open(next: Confirming) {
    stop.reset();
    purge.reset();
    setResult(null);
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

  return (
    <section className="panel" aria-labelledby="actions-heading">
      <h2 id="actions-heading">Actions</h2>
      {!canManage && (
        <p className="muted" data-testid="actions-role-note">
          Stopping and purging need the admin role; you are {role}.
        </p>
      )}
      <div className="form-row">
        <button
          type="button"
          className="secondary"
          disabled={!canManage || !canStop || pending}
          title={canStop ? undefined : `A ${state.toLowerCase()} workspace has nothing to stop.`}
          onClick={() => open("stop")}
        >
          Stop…
        </button>
        <button
          type="button"
          className="danger"
          disabled={!canManage || state === "PURGED" || state === "PURGING" || pending}
          onClick={() => open("purge")}
        >
          Purge…
        </button>
      </div>

      {confirming === "stop" && (
        <form
          className="form-row"
          style={{ marginTop: 12 }}
          aria-label="Confirm stop"
          onSubmit={(event) => submit(event, "stop")}
        >
          <label>
            Reason
            <input name="reason" maxLength={500} placeholder="stop requested by an admin" />
          </label>
          <label style={CHECKBOX_LABEL}>
            <input type="checkbox" name="force" /> Force, even with {activeLeases} active lease(s)
          </label>
          <button type="submit" disabled={pending}>
            {stop.isPending ? "Stopping…" : "Confirm stop"}
          </button>
          <button type="button" className="link" onClick={() => setConfirming(null)}>
            Cancel
          </button>
        </form>
      )}

      {confirming === "purge" && (
        <form
          className="form-row"
          style={{ marginTop: 12 }}
          aria-label="Confirm purge"
          onSubmit={(event) => submit(event, "purge")}
        >
          <p style={{ margin: 0, flexBasis: "100%" }} data-testid="purge-explanation">
            Purging deletes this generation of the workspace (generation {generation}): its files, skills, MCP
            declarations and offloaded data, for good. Its sessions keep working: their next use starts
            generation {generation + 1}, fresh and empty. Type <span className="mono">{workspaceId}</span> to
            confirm.
          </p>
          <label>
            Workspace id
            <input
              name="confirmId"
              autoComplete="off"
              value={typedId}
              onChange={(event) => setTypedId(event.target.value)}
            />
          </label>
          <label>
            Reason
            <input name="reason" maxLength={500} placeholder="purge requested" />
          </label>
          <label style={CHECKBOX_LABEL}>
            <input type="checkbox" name="force" /> Force, even with {activeLeases} active lease(s)
          </label>
          <button type="submit" className="danger" disabled={pending || typedId !== workspaceId}>
            {purge.isPending ? "Purging…" : `Purge generation ${generation}`}
          </button>
          <button type="button" className="link" onClick={() => setConfirming(null)}>
            Cancel
          </button>
        </form>
      )}

      {error && (
        <div className="alert error" role="alert" style={{ marginTop: 12 }} data-testid="action-error">
          {error.message}
        </div>
      )}
      {result && (
        <div className="alert success" role="status" style={{ marginTop: 12 }} data-testid="action-result">
          {result}
        </div>
      )}
    </section>
  );
}
