"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Pencil } from "lucide-react";
import { useState } from "react";
import { toast } from "sonner";
import { Button } from "@/app/_components/ui/button";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import type { WorkspaceEnv } from "@/server/workspace/workspace-env";
import { checkEnvRows, EnvEditor, type EnvRow, envRowsOf } from "../../_components/env-editor";
import { ServerErrors } from "../../agents/agent-ui";

/**
 * A session's environment variables, over its agent's: listed for every reader, edited in place by whoever
 * may change the session (a member only their own: the server answers NOT_FOUND for another's).
 */
export function SessionEnv({
  tenantSlug,
  sessionId,
  env,
  agentEnv,
  canEdit,
}: {
  tenantSlug: string;
  sessionId: string;
  env: WorkspaceEnv;
  /** The agent's variables (undefined while loading): named so the override is visible. */
  agentEnv: WorkspaceEnv | undefined;
  canEdit: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  // The rows being edited; null: not editing (the stored list shows).
  const [rows, setRows] = useState<EnvRow[] | null>(null);
  const save = useMutation(
    trpc.session.update.mutationOptions({
      onSuccess: () =>
        queryClient.invalidateQueries({ queryKey: trpc.session.get.queryKey({ tenantSlug, sessionId }) }),
    }),
  );
  const submitOnce = useSubmitOnce();
  const agentNames = Object.keys(agentEnv ?? {}).sort();

  function onSave() {
    if (!rows) return;
    const { env: next } = checkEnvRows(rows);
    if (!next) {
      toast.error("Fix the environment variables first.");
      return;
    }
    submitOnce(() =>
      save.mutateAsync({ tenantSlug, sessionId, patch: { env: next } }).then(() => {
        setRows(null);
        toast.success("Variables saved.");
      }),
    );
  }

  return (
    <section
      aria-labelledby="session-env-heading"
      className="bg-card mb-4 grid gap-3 rounded-xl border p-4 shadow-xs"
      data-testid="session-env"
    >
      <div className="flex items-center justify-between gap-2">
        <div>
          <h2 id="session-env-heading" className="text-sm font-medium">
            Environment variables
          </h2>
          <p className="text-muted-foreground text-xs">
            This session&apos;s commands see them over the agent&apos;s
            {agentNames.length > 0 ? ` (${agentNames.join(", ")})` : ""}. Not for secrets: whoever can read
            the session sees them.
          </p>
        </div>
        {canEdit && rows === null && (
          <Button variant="outline" size="sm" onClick={() => setRows(envRowsOf(env))}>
            <Pencil /> Edit variables
          </Button>
        )}
      </div>
      {rows === null ? (
        <EnvEditor rows={envRowsOf(env)} readOnly />
      ) : (
        <form
          aria-label="Session environment variables"
          className="grid gap-3"
          onSubmit={(event) => {
            event.preventDefault();
            onSave();
          }}
          onChange={resetErrorOnEdit(save)}
        >
          <EnvEditor
            rows={rows}
            onChange={setRows}
            help="Replaces this session's variables; its next command sees them."
          />
          <div className="flex gap-2">
            <Button type="submit" size="sm" disabled={save.isPending}>
              {save.isPending ? "Saving…" : "Save variables"}
            </Button>
            <Button
              type="button"
              variant="ghost"
              size="sm"
              disabled={save.isPending}
              onClick={() => {
                save.reset();
                setRows(null);
              }}
            >
              Cancel
            </Button>
          </div>
          <ServerErrors error={save.error} />
        </form>
      )}
    </section>
  );
}
