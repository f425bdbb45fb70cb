"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { Notice, type NoticeMessage } from "../../_components/notice";
import { useTenantRole } from "../../_components/tenant-role";
import { formatDate } from "../workspace-format";

type Transport = "stdio_mcp" | "http_mcp" | "sse_mcp";

/** The `.mcp` declaration the form describes (validated again by the engine's schema on the server). */
function declarationOf(form: {
  name: string;
  transport: Transport;
  command: string;
  args: string;
  url: string;
  stateful: boolean;
}): Record<string, unknown> {
  const mcpConfig =
    form.transport === "stdio_mcp"
      ? {
          type: "stdio_mcp",
          command: form.command.trim(),
          args: form.args
            .split("\n")
            .map((line) => line.trim())
            .filter(Boolean),
        }
      : { type: form.transport, url: form.url.trim() };
  // A stdio server is a process of its own: always stateful.
  return {
    name: form.name.trim(),
    is_stateful: form.transport === "stdio_mcp" ? true : form.stateful,
    mcp_config: mcpConfig,
  };
}

// The agent names and the workspace's sessions come from one page each: the lists' maximum page.
const LOOKUP_LIMIT = 200;

const STATE_TONE = { running: "ok", failed: "error", stopped: "revoked" } as const;

/**
 * The MCP servers of one scope of the workspace, (agent, session) as the agent loop sees them: each with
 * its state (running, failed with the last error, stopped) and tools; add and remove need members and up.
 * The scope is chosen by agent name and by session (from the workspace's sessions); "all sessions" is the
 * agent's shared scope, whose MCPs every session of the agent gets in its chats. Listing starts the
 * scope's servers, as a chat turn would.
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
  const agentLabel = (id: string) => agentNames.get(id) ?? id;
  const [form, setForm] = useState({
    name: "",
    transport: "stdio_mcp" as Transport,
    command: "",
    args: "",
    url: "",
    stateful: true,
  });
  const [message, setMessage] = useState<NoticeMessage | null>(null);

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
        setForm((current) => ({ ...current, name: "" }));
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

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setMessage(null);
    add.mutate({ ...target, declaration: declarationOf(form) });
  };

  return (
    <section className="panel" aria-labelledby="mcps-heading">
      <h2 id="mcps-heading">MCP servers</h2>
      <div className="form-row" role="group" aria-label="MCP scope">
        <label>
          Agent
          <select
            aria-label="Agent"
            value={scope.agentId}
            onChange={(event) => setScope({ agentId: event.target.value, sessionId: "" })}
          >
            {agentIds.map((id) => (
              <option key={id} value={id}>
                {agentLabel(id)}
              </option>
            ))}
            <option value="">No agent (legacy shared scope)</option>
          </select>
        </label>
        <label>
          Session
          <select
            aria-label="Session"
            value={scope.sessionId}
            onChange={(event) => setScope({ ...scope, sessionId: event.target.value })}
          >
            <option value="">All sessions of the agent (agent scope)</option>
            {agentSessions.map((session) => (
              <option key={session.id} value={session.id}>
                {session.name || "Unnamed session"} · {formatDate(session.createdAt)}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p className="muted" data-testid="mcp-scope-note">
        {scope.sessionId === ""
          ? scope.agentId
            ? `MCP servers here apply to every session of ${agentLabel(scope.agentId)}, in its chats.`
            : "The legacy shared scope, used by calls that name no agent."
          : "MCP servers of this session only; it also gets its agent's."}
      </p>

      {mcps.error && (
        <div className="alert error" role="alert">
          {mcps.error.message}
        </div>
      )}
      {mcps.isPending && <p className="muted">Starting the scope&apos;s servers…</p>}
      {mcps.data &&
        (mcps.data.length === 0 ? (
          <p className="muted">No MCP servers in this scope.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Name</th>
                <th>Transport</th>
                <th>State</th>
                <th>Tools</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {mcps.data.map((mcp) => (
                <tr key={mcp.name} data-testid="mcp-row">
                  <td className="mono">
                    {mcp.name}
                    {mcp.isStateful && <span className="muted"> (stateful)</span>}
                  </td>
                  <td className="mono">{mcp.type}</td>
                  <td>
                    <span className={`badge ${STATE_TONE[mcp.state]}`} data-testid="mcp-state">
                      {mcp.state}
                    </span>
                    {mcp.error && (
                      <div className="alert error" data-testid="mcp-error">
                        {mcp.error}
                      </div>
                    )}
                  </td>
                  <td>
                    {mcp.tools.length === 0 ? (
                      <span className="muted">none</span>
                    ) : (
                      <span className="mono" data-testid="mcp-tools">
                        {mcp.tools.map((tool) => tool.name.split("__").at(-1)).join(", ")}
                      </span>
                    )}
                  </td>
                  <td>
                    <button
                      type="button"
                      className="danger"
                      disabled={!canChange || remove.isPending}
                      onClick={() => remove.mutate({ ...target, name: mcp.name })}
                    >
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}

      <form className="form" aria-label="Add an MCP server" onSubmit={submit} style={{ marginTop: 16 }}>
        <div className="form-row">
          <label>
            Name
            <input
              required
              pattern="[a-zA-Z0-9_\-]+"
              value={form.name}
              onChange={(event) => setForm({ ...form, name: event.target.value })}
            />
          </label>
          <label>
            Transport
            <select
              value={form.transport}
              onChange={(event) => setForm({ ...form, transport: event.target.value as Transport })}
            >
              <option value="stdio_mcp">stdio (a command)</option>
              <option value="http_mcp">streamable HTTP</option>
              <option value="sse_mcp">SSE</option>
            </select>
          </label>
          {form.transport === "stdio_mcp" ? (
            <label>
              Command
              <input
                required
                value={form.command}
                onChange={(event) => setForm({ ...form, command: event.target.value })}
              />
            </label>
          ) : (
            <>
              <label>
                URL
                <input
                  required
                  type="url"
                  value={form.url}
                  onChange={(event) => setForm({ ...form, url: event.target.value })}
                />
              </label>
              <label style={{ flexDirection: "row", alignItems: "center" }}>
                <input
                  type="checkbox"
                  checked={form.stateful}
                  onChange={(event) => setForm({ ...form, stateful: event.target.checked })}
                />
                Stateful (one session kept open)
              </label>
            </>
          )}
        </div>
        {form.transport === "stdio_mcp" && (
          <label>
            Arguments (one per line)
            <textarea
              rows={3}
              value={form.args}
              onChange={(event) => setForm({ ...form, args: event.target.value })}
            />
          </label>
        )}
        <div>
          <button type="submit" disabled={!canChange || add.isPending}>
            {add.isPending ? "Adding…" : "Add"}
          </button>
        </div>
      </form>
      {!canChange && role && (
        <p className="muted">Changing MCP servers needs the member role; you are {role}.</p>
      )}
      <Notice message={message} testId="mcps-message" />
    </section>
  );
}
