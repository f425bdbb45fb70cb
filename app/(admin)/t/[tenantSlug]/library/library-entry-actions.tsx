"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { PackagePlus, UserPlus } from "lucide-react";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
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
import { formString } from "@/app/_components/ui/form-data";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { LibraryEntryView } from "@/server/modules/library/library.types";

// The pickers list one page: the lists' maximum page.
const LOOKUP_LIMIT = 200;

const OUTCOME_TEXT = {
  added: "added to",
  replaced: "replaced in",
  unchanged: "already in",
} as const;

/** "Equip": the entry into one agent's defaults (replacing a default of the same name), in one click. */
export function EquipDialog({
  tenantSlug,
  entry,
  onDone,
}: {
  tenantSlug: string;
  entry: LibraryEntryView;
  onDone: () => unknown;
}) {
  const trpc = useTRPC();
  const [open, setOpen] = useState(false);
  const agents = useQuery({
    ...trpc.agent.list.queryOptions({ tenantSlug, limit: LOOKUP_LIMIT }),
    enabled: open,
  });
  const equip = useMutation(
    trpc.library.equip.mutationOptions({
      onSuccess: async (result) => {
        const agentName =
          agents.data?.items.find((agent) => agent.id === result.agentId)?.name ?? "the agent";
        toast.success(`${result.name} ${OUTCOME_TEXT[result.outcome]} the defaults of ${agentName}.`);
        setOpen(false);
        await onDone();
      },
    }),
  );
  const users = new Set(entry.usedBy.map((use) => use.agentId));

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const agentId = formString(new FormData(event.currentTarget), "agentId");
    if (agentId) equip.mutate({ tenantSlug, entryId: entry.id, agentId });
  }

  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        setOpen(next);
        equip.reset();
      }}
    >
      <DialogTrigger asChild>
        <Button variant="ghost" size="sm" aria-label={`Equip an agent with ${entry.name}`}>
          <UserPlus /> Equip
        </Button>
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>Equip an agent with {entry.name}</DialogTitle>
          <DialogDescription>
            {entry.kind === "MCP"
              ? "The agent's default MCP servers get this declaration (a default of the same name is replaced); its workspaces start it at their next use."
              : "The agent's default skills get this skill (a default of the same name is replaced); its workspaces receive it at their next use."}
          </DialogDescription>
        </DialogHeader>
        <form className="grid gap-4" onSubmit={onSubmit} aria-label={`Equip with ${entry.name}`}>
          <Field label="Agent">
            <Select name="agentId" required defaultValue="">
              <option value="" disabled>
                {agents.data ? "Choose an agent" : "Loading agents…"}
              </option>
              {agents.data?.items.map((agent) => (
                <option key={agent.id} value={agent.id}>
                  {agent.name}
                  {users.has(agent.id) ? " (has it)" : ""}
                </option>
              ))}
            </Select>
          </Field>
          {equip.error && <Alert>{equip.error.message}</Alert>}
          <DialogFooter>
            <Button type="submit" disabled={equip.isPending}>
              {equip.isPending ? "Equipping…" : "Equip"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}

/**
 * "Install into a workspace": an MCP entry into the MCP servers of one agent's scope in that workspace (all
 * of the agent's sessions there), a skill entry into the agent's skill partition. The workspace is attached
 * (provisioned if needed) to do it, as any change of its MCP servers or skills is.
 */
export function InstallDialog({ tenantSlug, entry }: { tenantSlug: string; entry: LibraryEntryView }) {
  const trpc = useTRPC();
  const [open, setOpen] = useState(false);
  const [workspaceId, setWorkspaceId] = useState("");
  const [agentId, setAgentId] = useState("");
  const workspaces = useQuery({
    ...trpc.workspace.list.queryOptions({ tenantSlug, limit: LOOKUP_LIMIT }),
    enabled: open,
  });
  const agents = useQuery({
    ...trpc.agent.list.queryOptions({ tenantSlug, limit: LOOKUP_LIMIT }),
    enabled: open,
  });
  const agentName = (id: string | null) =>
    (id && agents.data?.items.find((agent) => agent.id === id)?.name) || (id ? "an agent" : "no agent");
  const done = (what: string) => {
    toast.success(what);
    setOpen(false);
  };
  const addMcp = useMutation(
    trpc.workspace.mcp.addFromLibrary.mutationOptions({
      onSuccess: (result) => done(`${result.name} installed in the workspace.`),
    }),
  );
  const addSkill = useMutation(
    trpc.workspace.skill.addFromLibrary.mutationOptions({
      onSuccess: (result) =>
        done(
          result.deduplicated ? `${result.name} was already installed there.` : `${result.name} installed.`,
        ),
    }),
  );
  const pending = addMcp.isPending || addSkill.isPending;
  const error = addMcp.error ?? addSkill.error;

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (!workspaceId) return;
    if (entry.kind === "MCP") {
      addMcp.mutate({ tenantSlug, entryId: entry.id, workspaceId, agentId, sessionId: "" });
    } else {
      addSkill.mutate({ tenantSlug, entryId: entry.id, workspaceId, agentId: agentId || null });
    }
  }

  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        setOpen(next);
        addMcp.reset();
        addSkill.reset();
      }}
    >
      <DialogTrigger asChild>
        <Button variant="ghost" size="sm" aria-label={`Install ${entry.name} into a workspace`}>
          <PackagePlus /> Install
        </Button>
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>Install {entry.name} into a workspace</DialogTitle>
          <DialogDescription>
            {entry.kind === "MCP"
              ? "Added to the MCP servers of the agent's scope in that workspace: every session of the agent there gets its tools."
              : "Installed into the agent's skills in that workspace (or the shared partition without an agent)."}
          </DialogDescription>
        </DialogHeader>
        <form className="grid gap-4" onSubmit={onSubmit} aria-label={`Install ${entry.name}`}>
          <Field label="Workspace">
            <Select
              required
              value={workspaceId}
              onChange={(event) => {
                setWorkspaceId(event.target.value);
                const chosen = workspaces.data?.items.find(
                  (workspace) => workspace.id === event.target.value,
                );
                setAgentId(chosen?.agentId ?? "");
              }}
            >
              <option value="" disabled>
                {workspaces.data ? "Choose a workspace" : "Loading workspaces…"}
              </option>
              {workspaces.data?.items.map((workspace) => (
                <option key={workspace.id} value={workspace.id}>
                  {workspace.id.slice(0, 12)}… · {agentName(workspace.agentId)} ·{" "}
                  {workspace.state.toLowerCase()}
                </option>
              ))}
            </Select>
          </Field>
          <Field label="For agent" hint="Whose MCP scope or skill partition gets it.">
            <Select value={agentId} onChange={(event) => setAgentId(event.target.value)}>
              <option value="">No agent (shared scope)</option>
              {agents.data?.items.map((agent) => (
                <option key={agent.id} value={agent.id}>
                  {agent.name}
                </option>
              ))}
            </Select>
          </Field>
          {error && <Alert>{error.message}</Alert>}
          <DialogFooter>
            <Button type="submit" disabled={pending || !workspaceId}>
              {pending ? "Installing…" : "Install"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}
