"use client";

import { Plus } from "lucide-react";
import { type FormEvent, type ReactNode, useState } from "react";
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
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { Textarea } from "@/app/_components/ui/textarea";
// The engine's own schema (plain zod, no server code): the form refuses exactly what the API would.
import { type TMcpDeclaration, ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";

type Transport = "stdio_mcp" | "http_mcp";

const lines = (text: string) =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);

/** `KEY=value` (env) or `Name: value` (headers) lines as a record; null when there are none. */
function pairs(text: string, separator: "=" | ":"): Record<string, string> | null | string {
  const entries: [string, string][] = [];
  for (const line of lines(text)) {
    const at = line.indexOf(separator);
    if (at <= 0) return `"${line}" is not ${separator === "=" ? "KEY=value" : "Name: value"}`;
    entries.push([line.slice(0, at).trim(), line.slice(at + 1).trim()]);
  }
  return entries.length ? Object.fromEntries(entries) : null;
}

/** The form's fields as a declaration, validated by ZMcpDeclaration; a readable line per problem otherwise. */
function declarationFromForm(form: FormData): { declaration: TMcpDeclaration } | { errors: string[] } {
  const transport: Transport = formString(form, "transport") === "http_mcp" ? "http_mcp" : "stdio_mcp";
  const env = pairs(formString(form, "env"), "=");
  const headers = pairs(formString(form, "headers"), ":");
  if (typeof env === "string") return { errors: [`Environment: ${env}`] };
  if (typeof headers === "string") return { errors: [`Headers: ${headers}`] };
  const timeout = formString(form, "executionTimeout").trim();
  const raw = {
    name: formString(form, "mcpName").trim(),
    // A stdio server is a process of its own, always stateful; an HTTP one keeps a session only if asked.
    is_stateful: transport === "stdio_mcp" || form.get("stateful") === "on",
    mcp_config:
      transport === "stdio_mcp"
        ? {
            type: transport,
            command: formString(form, "command").trim(),
            args: lines(formString(form, "args")),
            env,
          }
        : { type: transport, url: formString(form, "url").trim(), headers },
    execution_timeout: timeout ? Number(timeout) : null,
  };
  const parsed = ZMcpDeclaration.safeParse(raw);
  if (parsed.success) return { declaration: parsed.data };
  return {
    errors: parsed.error.issues.map((issue) => `${FIELD[issue.path.join(".")] ?? "Input"}: ${issue.message}`),
  };
}

const FIELD: Record<string, string> = {
  name: "Identifier",
  "mcp_config.command": "Command",
  "mcp_config.url": "URL",
  is_stateful: "Session",
  execution_timeout: "Timeout",
};

/**
 * "Add an MCP server": a stdio command (with arguments and environment) or an HTTP URL (with headers),
 * checked against the engine's declaration schema before `onAdd` gets it. `onAdd` may reject (a server
 * refusal): the dialog then stays open with the message. Its own form lives in a portal, and its submit
 * event is stopped, so it can open from inside another form (the agent's).
 */
export function McpDeclarationDialog({
  title,
  description,
  submitLabel,
  onAdd,
  trigger,
  withDescription = false,
}: {
  title: string;
  description: ReactNode;
  submitLabel: string;
  /** `about`: the Description field's text, when `withDescription` shows it (library entries). */
  /** `idempotencyKey`: one per submission (useSubmitOnce), for a create that takes one. */
  onAdd: (declaration: TMcpDeclaration, about: string, idempotencyKey: string) => unknown;
  trigger?: ReactNode;
  withDescription?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const [transport, setTransport] = useState<Transport>("stdio_mcp");
  const [errors, setErrors] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const submitOnce = useSubmitOnce();

  async function onSubmit(event: FormEvent<HTMLFormElement>, idempotencyKey: string) {
    event.preventDefault();
    event.stopPropagation();
    const form = new FormData(event.currentTarget);
    const result = declarationFromForm(form);
    if ("errors" in result) return setErrors(result.errors);
    setBusy(true);
    try {
      await onAdd(result.declaration, formString(form, "about").trim(), idempotencyKey);
      setErrors([]);
      setOpen(false);
    } catch (error) {
      setErrors([error instanceof Error ? error.message : String(error)]);
    } finally {
      setBusy(false);
    }
  }

  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        setOpen(next);
        if (!next) setErrors([]);
      }}
    >
      <DialogTrigger asChild>
        {trigger ?? (
          <Button type="button" variant="outline" size="sm">
            <Plus /> Add MCP server
          </Button>
        )}
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>{title}</DialogTitle>
          <DialogDescription>{description}</DialogDescription>
        </DialogHeader>
        <form
          className="grid gap-4"
          onSubmit={(event) => {
            event.preventDefault();
            submitOnce((idempotencyKey) => onSubmit(event, idempotencyKey));
          }}
          aria-label="MCP server"
        >
          <Field
            label="Identifier"
            hint="Letters, digits, '_' and '-': tools appear as mcp__<identifier>__<tool>."
          >
            <Input name="mcpName" required maxLength={100} placeholder="github" />
          </Field>
          {withDescription && (
            <Field label="Description" hint="What it is for and why it is trusted, for whoever equips it.">
              <Textarea name="about" rows={2} maxLength={2000} />
            </Field>
          )}
          <Field label="Transport">
            <Select
              name="transport"
              value={transport}
              onChange={(event) => setTransport(event.target.value === "http_mcp" ? "http_mcp" : "stdio_mcp")}
            >
              <option value="stdio_mcp">stdio: a command run in the workspace</option>
              <option value="http_mcp">HTTP: a server Berth dials</option>
            </Select>
          </Field>
          {transport === "stdio_mcp" ? (
            <>
              <Field label="Command" hint="Runs confined to the workspace, like the agent's Bash.">
                <Input name="command" required placeholder="npx" />
              </Field>
              <Field label="Arguments" hint="One per line.">
                <Textarea name="args" rows={2} placeholder={"-y\n@modelcontextprotocol/server-filesystem"} />
              </Field>
              <Field label="Environment" hint="KEY=value, one per line. Stored with the declaration.">
                <Textarea name="env" rows={2} placeholder="LOG_LEVEL=info" />
              </Field>
            </>
          ) : (
            <>
              <Field
                label="URL"
                hint="Streamable HTTP endpoint. Private addresses need the operator's allowlist."
              >
                <Input name="url" type="url" required placeholder="https://mcp.example.com/mcp" />
              </Field>
              <Field label="Headers" hint="Name: value, one per line (e.g. an Authorization header).">
                <Textarea name="headers" rows={2} placeholder="Authorization: Bearer …" />
              </Field>
              <label className="flex items-center gap-2 text-sm">
                <input type="checkbox" name="stateful" className="size-4" /> Keep one MCP session open per
                scope
              </label>
            </>
          )}
          <Field label="Timeout" hint="Seconds per tool call; empty: the workspace default.">
            <Input name="executionTimeout" type="number" min={1} step="any" />
          </Field>
          {errors.length > 0 && (
            <Alert>
              <ul>
                {errors.map((error) => (
                  <li key={error}>{error}</li>
                ))}
              </ul>
            </Alert>
          )}
          <DialogFooter>
            <Button type="submit" disabled={busy}>
              {busy ? "Saving…" : submitLabel}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}

/** One line saying what a declaration runs or dials. */
export function mcpSummary(declaration: TMcpDeclaration): string {
  const config = declaration.mcp_config;
  return config.type === "stdio_mcp" ? [config.command, ...config.args].join(" ") : config.url;
}
