"use client";

import { Plus } from "lucide-react";
import { type FormEvent, useState } from "react";
import { Button } from "@/app/_components/ui/button";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { Textarea } from "@/app/_components/ui/textarea";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";

type Transport = "stdio_mcp" | "http_mcp" | "sse_mcp";
type McpForm = {
  name: string;
  transport: Transport;
  command: string;
  args: string;
  url: string;
  stateful: boolean;
};
const EMPTY: McpForm = { name: "", transport: "stdio_mcp", command: "", args: "", url: "", stateful: true };

/** The `.mcp` declaration the form describes (validated again by the engine's schema on the server). */
function declarationOf(form: McpForm): Record<string, unknown> {
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

/** Declares one MCP server in the chosen scope: a command (stdio) or a URL (streamable HTTP, SSE). */
export function McpAddForm({
  disabled,
  pending,
  onAdd,
}: {
  disabled: boolean;
  pending: boolean;
  onAdd: (declaration: Record<string, unknown>) => Promise<unknown>;
}) {
  const [form, setForm] = useState<McpForm>(EMPTY);
  const submitOnce = useSubmitOnce();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    submitOnce(() => onAdd(declarationOf(form)).then(() => setForm((current) => ({ ...current, name: "" }))));
  };
  return (
    <form className="grid gap-4" aria-label="Add an MCP server" onSubmit={submit}>
      <div className="grid gap-4 sm:grid-cols-3">
        <Field label="Name" hint="Letters, digits, - and _.">
          <Input
            required
            pattern="[a-zA-Z0-9_\-]+"
            value={form.name}
            onChange={(event) => setForm({ ...form, name: event.target.value })}
          />
        </Field>
        <Field label="Transport">
          <Select
            value={form.transport}
            onChange={(event) => setForm({ ...form, transport: event.target.value as Transport })}
          >
            <option value="stdio_mcp">stdio (a command)</option>
            <option value="http_mcp">streamable HTTP</option>
            <option value="sse_mcp">SSE</option>
          </Select>
        </Field>
        {form.transport === "stdio_mcp" ? (
          <Field label="Command">
            <Input
              required
              value={form.command}
              onChange={(event) => setForm({ ...form, command: event.target.value })}
            />
          </Field>
        ) : (
          <Field label="URL">
            <Input
              required
              type="url"
              value={form.url}
              onChange={(event) => setForm({ ...form, url: event.target.value })}
            />
          </Field>
        )}
      </div>
      {form.transport === "stdio_mcp" ? (
        <Field label="Arguments (one per line)">
          <Textarea
            rows={3}
            value={form.args}
            onChange={(event) => setForm({ ...form, args: event.target.value })}
          />
        </Field>
      ) : (
        <label className="flex items-center gap-2 text-sm">
          <input
            type="checkbox"
            checked={form.stateful}
            onChange={(event) => setForm({ ...form, stateful: event.target.checked })}
          />
          Stateful (one session kept open)
        </label>
      )}
      <div>
        <Button type="submit" disabled={disabled || pending}>
          <Plus /> {pending ? "Adding…" : "Add"}
        </Button>
      </div>
    </form>
  );
}
