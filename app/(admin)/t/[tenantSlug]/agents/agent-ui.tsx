import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import type { IsolationPolicy } from "@/server/modules/agent/agent.types";

// Type-only import above: the client bundle takes no server module, the compiler keeps this list honest.
export const ISOLATION_POLICIES = [
  "PER_AGENT",
  "PER_SESSION",
  "PER_USER",
] as const satisfies readonly IsolationPolicy[];

/** null: the agent follows the tenant's default (Settings), PER_AGENT unless the tenant set another. */
export function isolationLabel(policy: IsolationPolicy | null): string {
  switch (policy) {
    case null:
      return "tenant default";
    case "PER_AGENT":
      return "one workspace per agent";
    case "PER_SESSION":
      return "one workspace per session";
    case "PER_USER":
      return "one workspace per user";
  }
}

export function parseIsolation(value: FormDataEntryValue | null): IsolationPolicy | null {
  return ISOLATION_POLICIES.find((policy) => policy === value) ?? null;
}

/** A trimmed form text field ("" when absent). */
export function formText(form: FormData, name: string): string {
  const value = form.get(name);
  return typeof value === "string" ? value.trim() : "";
}

export function agentDeleteConfirmText(name: string): string {
  return (
    `Delete agent "${name}"?\n\nEvery session of this agent is deleted with it, chat history included, ` +
    "and its skills and MCP scopes are purged from every workspace it used. This cannot be undone."
  );
}

export function KeyBadge({ hasApiKey }: { hasApiKey: boolean }) {
  return (
    <Badge tone={hasApiKey ? "success" : "warning"} data-testid="key-state">
      {hasApiKey ? "key set" : "no key"}
    </Badge>
  );
}

/** What each isolation choice means, for the form's hint. */
export const ISOLATION_HELP =
  "Per agent: every session of the agent shares one workspace (files persist across chats). " +
  "Per session: each session gets a fresh workspace of its own. " +
  "Per user: each person gets their own workspace for this agent, shared by their sessions. " +
  "Tenant default: whatever Settings says for agents that name none.";

// Field names as the form shows them; server issue paths are those of the tRPC input.
const FIELD_LABELS: Record<string, string> = {
  name: "Name",
  description: "Description",
  systemPrompt: "System prompt",
  "modelConfig.temperature": "Temperature",
  "modelConfig.maxOutputTokens": "Max output tokens",
  defaultMcpConfigs: "Default MCP servers",
  defaultSkills: "Default skills",
  "modelConfig.provider": "Provider",
  "modelConfig.model": "Model",
  "modelConfig.baseUrl": "Base URL",
  "modelConfig.apiKey": "API key",
  modelApiKey: "API key",
  isolationPolicy: "Isolation",
  defaultIsolationPolicy: "Default isolation",
  workspaceIdleTtlMs: "Idle TTL",
  stdioMcpMinRole: "stdio MCP servers",
};

type Issue = { path: string; message: string };

/** `defaultMcpConfigs.2.name` → "Default MCP servers #3 (name)". */
function labelOfItem(path: string): string | null {
  const [list, index, ...rest] = path.split(".");
  const label = list ? FIELD_LABELS[list] : undefined;
  if (!label || index === undefined || !/^\d+$/.test(index)) return null;
  return `${label} #${Number(index) + 1}${rest.length ? ` (${rest.join(".")})` : ""}`;
}

/** The structural part of a tRPC client error this page reads (see the error formatter in server/api/trpc.ts). */
export type ServerError = {
  message: string;
  data?: {
    issues?: { path: string[]; message: string }[] | null;
    appError?: { details: unknown } | null;
  } | null;
};

/** Input validation issues from the router (zod) or the service (AppError BAD_REQUEST details). */
function issuesOf(error: ServerError): Issue[] {
  const fromInput = error.data?.issues;
  if (fromInput?.length)
    return fromInput.map((issue) => ({ path: issue.path.join("."), message: issue.message }));
  const details = error.data?.appError?.details;
  if (details && typeof details === "object" && "issues" in details && Array.isArray(details.issues)) {
    return (details.issues as unknown[]).flatMap((issue) =>
      issue && typeof issue === "object" && "message" in issue && typeof issue.message === "string"
        ? [
            {
              path: "path" in issue && typeof issue.path === "string" ? issue.path : "",
              message: issue.message,
            },
          ]
        : [],
    );
  }
  return [];
}

/** A failed mutation, next to its form: one line per invalid field when the server said which. */
export function ServerErrors({ error }: { error: ServerError | null }) {
  if (!error) return null;
  const issues = issuesOf(error);
  return (
    <Alert className="mt-3">
      {issues.length === 0 ? (
        error.message
      ) : (
        <ul className="issues">
          {issues.map((issue, index) => {
            const path = issue.path.replace(/^patch\./, "");
            return (
              <li key={index}>
                <strong>{FIELD_LABELS[path] ?? labelOfItem(path) ?? (path || "Input")}</strong>:{" "}
                {issue.message}
              </li>
            );
          })}
        </ul>
      )}
    </Alert>
  );
}
