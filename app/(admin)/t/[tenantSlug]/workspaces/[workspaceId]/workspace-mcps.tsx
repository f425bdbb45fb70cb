"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Plug, RefreshCw, Trash2 } from "lucide-react";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { Notice, type NoticeMessage } from "../../_components/notice";
import { useTenantRole } from "../../_components/tenant-role";
import { McpAddForm } from "./mcp-add-form";

// The agent names and the workspace's sessions come from one page each: the lists' maximum page.
const LOOKUP_LIMIT = 200;

/**
 * The MCP servers of one scope of the workspace, (agent, session) as the agent loop sees them, chosen by
 * agent name and session name: each with its state (running, failed with the last error and when, stopped)
 * and tools; add and remove need members and up. "All sessions" is the agent's shared scope, whose MCPs
 * every session of the agent gets. Listing starts the scope's servers, as a chat turn would.
 */
export function WorkspaceMcps({
  tenantSlug,
  workspaceId,
  agentId,
}: {
  tenantSlug: string;
  workspaceId: string;
  agentId: string | null;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [scope, setScope] = useState({ agentId: agentId ?? "", sessionId: "" });
  const [message, setMessage] = useState<NoticeMessage | null>(null);
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: LOOKUP_LIMIT }));
  const sessions = useQuery(trpc.session.list.queryOptions({ tenantSlug, workspaceId, limit: LOOKUP_LIMIT }));
  const agentNames = new Map(agents.data?.items.map((agent) => [agent.id, agent.name]));
  // The workspace's own agent, then every agent with a session here (a PER_USER workspace has several).
  const agentIds = [
    ...new Set([
      ...(agentId ? [agentId] : []),
      ...(sessions.data?.items.map((session) => session.agentId) ?? []),
    ]),
  ];
  const agentSessions = sessions.data?.items.filter((session) => session.agentId === scope.agentId) ?? [];
  const agentLabel = (id: string) => agentNames.get(id) ?? `agent ${id.slice(0, 8)}`;
  const { role, can } = useTenantRole(tenantSlug);
  const canChange = can("session:use", false);

  const target = { tenantSlug, workspaceId, ...scope };
  const mcps = useQuery(trpc.workspace.mcp.list.queryOptions(target));
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.workspace.mcp.list.queryKey(target) });
  const onError = (error: { message: string }) => setMessage({ kind: "error", text: error.message });
  const add = useMutation(
    trpc.workspace.mcp.add.mutationOptions({
      onSuccess: (result) => {
        setMessage({ kind: "success", text: `Added ${result.name}.` });
        void refresh();
      },
      onError,
    }),
  );
  const remove = useMutation(
    trpc.workspace.mcp.remove.mutationOptions({
      onSuccess: (_result, input) => {
        setMessage({ kind: "success", text: `Removed ${input.name}.` });
        void refresh();
      },
      onError,
    }),
  );

  return (
    <div className="grid gap-5">
      <Card>
        <CardHeader>
          <div>
            <CardTitle>MCP servers</CardTitle>
            <CardDescription data-testid="mcp-scope-note">
              {scope.sessionId === ""
                ? scope.agentId
                  ? `Apply to every session of ${agentLabel(scope.agentId)}, in its chats.`
                  : "The legacy shared scope, used by calls that name no agent."
                : "This session's own servers; it also gets its agent's."}
            </CardDescription>
          </div>
          <div className="flex flex-wrap items-center gap-2" role="group" aria-label="MCP scope">
            <div className="w-48">
              <Select
                aria-label="Agent"
                value={scope.agentId}
                onChange={(event) => setScope({ agentId: event.target.value, sessionId: "" })}
                className="[&_select]:h-8"
              >
                {agentIds.map((id) => (
                  <option key={id} value={id}>
                    {agentLabel(id)}
                  </option>
                ))}
                <option value="">No agent (legacy shared scope)</option>
              </Select>
            </div>
            <div className="w-56">
              <Select
                aria-label="Session"
                value={scope.sessionId}
                onChange={(event) => setScope({ ...scope, sessionId: event.target.value })}
                className="[&_select]:h-8"
              >
                <option value="">All sessions of the agent</option>
                {agentSessions.map((session) => (
                  <option key={session.id} value={session.id}>
                    {session.name || `Unnamed session ${session.id.slice(0, 8)}`}
                  </option>
                ))}
              </Select>
            </div>
            <Button
              variant="outline"
              size="icon-sm"
              aria-label="Refresh MCP servers"
              disabled={mcps.isFetching}
              onClick={() => void mcps.refetch()}
            >
              <RefreshCw className={mcps.isFetching ? "animate-spin" : undefined} />
            </Button>
          </div>
        </CardHeader>
        {mcps.error ? (
          <CardContent>
            <Alert>{mcps.error.message}</Alert>
          </CardContent>
        ) : !mcps.data ? (
          <CardContent className="grid gap-2">
            <span className="text-muted-foreground text-xs">Starting the scope&apos;s servers…</span>
            <Skeleton className="h-5 w-full" />
          </CardContent>
        ) : mcps.data.length === 0 ? (
          <EmptyState icon={Plug} title="No MCP servers in this scope" />
        ) : (
          <Table aria-label="MCP servers">
            <TableHeader>
              <TableRow className="hover:bg-transparent">
                <TableHead>Name</TableHead>
                <TableHead>Transport</TableHead>
                <TableHead>State</TableHead>
                <TableHead>Tools</TableHead>
                <TableHead>
                  <span className="sr-only">Actions</span>
                </TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {mcps.data.map((mcp) => (
                <TableRow key={mcp.name} data-testid="mcp-row">
                  <TableCell className="font-mono text-xs">
                    {mcp.name}
                    {mcp.isStateful && <span className="text-muted-foreground"> (stateful)</span>}
                  </TableCell>
                  <TableCell>
                    <code className="text-xs">{mcp.type}</code>
                  </TableCell>
                  <TableCell className="max-w-80">
                    <StateBadge state={mcp.state} data-testid="mcp-state" />
                    {mcp.error && (
                      <div className="text-destructive mt-1 text-xs break-words" data-testid="mcp-error">
                        {mcp.error}
                        {mcp.failedAt && (
                          <span className="text-muted-foreground">
                            {" "}
                            (<RelativeTime value={mcp.failedAt} />)
                          </span>
                        )}
                      </div>
                    )}
                  </TableCell>
                  <TableCell className="max-w-72">
                    {mcp.tools.length === 0 ? (
                      <span className="text-muted-foreground text-xs">none</span>
                    ) : (
                      <span className="font-mono text-xs break-words" data-testid="mcp-tools">
                        {mcp.tools.map((tool) => tool.name.split("__").at(-1)).join(", ")}
                      </span>
                    )}
                  </TableCell>
                  <TableCell className="text-right">
                    <ConfirmDialog
                      title={`Remove the MCP server ${mcp.name}?`}
                      description="Its declaration leaves this scope and its process (or session) is closed."
                      confirmLabel="Remove"
                      onConfirm={() =>
                        remove.mutateAsync({ ...target, name: mcp.name }).catch(() => undefined)
                      }
                      trigger={
                        <Button variant="ghost" size="sm" disabled={!canChange || remove.isPending}>
                          <Trash2 /> Remove
                        </Button>
                      }
                    />
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
      </Card>

      <Card>
        <CardHeader>
          <div>
            <CardTitle>Add an MCP server</CardTitle>
            <CardDescription>Declared in the scope chosen above.</CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          <McpAddForm
            disabled={!canChange}
            pending={add.isPending}
            onAdd={(declaration) => {
              setMessage(null);
              return add.mutateAsync({ ...target, declaration });
            }}
          />
          {!canChange && role && (
            <p className="text-muted-foreground mt-3 text-xs">
              Changing MCP servers needs the member role; you are {role}.
            </p>
          )}
          <Notice message={message} testId="mcps-message" />
        </CardContent>
      </Card>
    </div>
  );
}
