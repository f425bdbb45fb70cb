"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { MessageSquarePlus } from "lucide-react";
import { useRouter } from "next/navigation";
import { type FormEvent, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
  DialogTrigger,
} from "@/app/_components/ui/dialog";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { checkEnvRows, EnvEditor, type EnvRow } from "../_components/env-editor";
import { useTenantRole } from "../_components/tenant-role";
import { formText } from "../agents/agent-ui";

// The agent picker lists one page of agents: the list's maximum page.
const AGENT_LOOKUP_LIMIT = 200;

/**
 * "New session": pick the agent (fixed when `agentId` is given), optionally name it, and land in its chat.
 * Hidden for roles that cannot use sessions (viewers).
 */
export function NewSessionButton({
  tenantSlug,
  agentId,
  variant = "default",
}: {
  tenantSlug: string;
  agentId?: string;
  variant?: "default" | "ghost" | "outline";
}) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const [open, setOpen] = useState(false);
  const [envRows, setEnvRows] = useState<EnvRow[]>([]);
  const agents = useQuery({
    ...trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }),
    enabled: open && !agentId,
  });
  const create = useMutation(
    trpc.session.create.mutationOptions({
      onSuccess: async ({ sessionId }) => {
        await queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() });
        router.push(`/t/${encodeURIComponent(tenantSlug)}/sessions/${encodeURIComponent(sessionId)}`);
      },
    }),
  );
  const submitOnce = useSubmitOnce();
  if (!can("session:use", false)) return null;

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const chosen = agentId ?? formText(form, "agentId");
    const name = formText(form, "name");
    // A refused row says why next to it.
    const { env } = checkEnvRows(envRows);
    if (!env) return;
    submitOnce((idempotencyKey) =>
      create.mutateAsync({
        tenantSlug,
        agentId: chosen,
        idempotencyKey,
        ...(name ? { name } : {}),
        ...(Object.keys(env).length > 0 ? { env } : {}),
      }),
    );
  }

  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        setOpen(next);
        if (!next) setEnvRows([]);
      }}
    >
      <DialogTrigger asChild>
        <Button variant={variant} size="sm">
          <MessageSquarePlus /> New session
        </Button>
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>New session</DialogTitle>
          <DialogDescription>
            A conversation with an agent. Its workspace follows the agent&apos;s isolation policy and is
            provisioned on the first message.
          </DialogDescription>
        </DialogHeader>
        <form
          className="grid gap-4"
          onSubmit={onSubmit}
          onChange={resetErrorOnEdit(create)}
          aria-label="New session"
        >
          {!agentId && (
            <Field label="Agent">
              <Select name="agentId" required defaultValue="">
                <option value="" disabled>
                  {agents.data ? "Choose an agent" : "Loading agents…"}
                </option>
                {agents.data?.items.map((agent) => (
                  <option key={agent.id} value={agent.id}>
                    {agent.name}
                  </option>
                ))}
              </Select>
            </Field>
          )}
          <Field label="Session name" hint="Optional.">
            <Input name="name" maxLength={200} placeholder="Investigate the flaky test" autoFocus />
          </Field>
          <fieldset className="grid gap-2">
            <legend className="mb-2 text-sm font-medium">Environment variables</legend>
            <EnvEditor
              rows={envRows}
              onChange={setEnvRows}
              help="Optional; over the agent's of the same name. Not for secrets: whoever can read the session sees them."
            />
          </fieldset>
          {create.error && <Alert>{create.error.message}</Alert>}
          <DialogFooter>
            <Button type="submit" disabled={create.isPending}>
              {create.isPending ? "Creating…" : "Create session"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}
