"use client";

import { Plus, X } from "lucide-react";
import { useId } from "react";
import { Button } from "@/app/_components/ui/button";
import { Input } from "@/app/_components/ui/input";
import { type WorkspaceEnv, WORKSPACE_ENV_LIMITS, ZWorkspaceEnv } from "@/server/workspace/workspace-env";

/** One NAME / value row as typed; `key` is React's only (rows move when one above is removed). */
export type EnvRow = { key: string; name: string; value: string };

const ENV_HELP =
  "Set in the environment of the agent's commands. Plain configuration, not for secrets: anyone who can read it sees them.";

let addedRows = 0;

/** Rows of a stored map, in name order; keys from the position, so a re-render keeps the inputs. */
export function envRowsOf(env: WorkspaceEnv): EnvRow[] {
  return Object.keys(env)
    .sort()
    .map((name, index) => ({ key: `stored-${index}`, name, value: env[name]! }));
}

/**
 * The map the rows make, or why not: each row's error by its key (the server's rules, through the same
 * schema), and a list-wide one (too many). A row left entirely blank is skipped, as "Add variable" twice
 * should not block a save.
 */
export function checkEnvRows(rows: readonly EnvRow[]): {
  env: WorkspaceEnv | null;
  rowErrors: Record<string, string>;
  listError: string | null;
} {
  const rowErrors: Record<string, string> = {};
  // A Map, not an object: a name such as __proto__ is valid and must not reach a prototype.
  const env = new Map<string, string>();
  const filled = rows.filter((row) => row.name.trim() !== "" || row.value !== "");
  for (const row of filled) {
    const name = row.name.trim();
    if (name === "") rowErrors[row.key] = "a name is required";
    else if (env.has(name)) rowErrors[row.key] = "already set in a row above";
    else {
      const parsed = ZWorkspaceEnv.safeParse(Object.fromEntries([[name, row.value]]));
      if (parsed.success) env.set(name, row.value);
      else rowErrors[row.key] = firstMessage(parsed.error.issues);
    }
  }
  const listError =
    filled.length > WORKSPACE_ENV_LIMITS.variables
      ? `at most ${WORKSPACE_ENV_LIMITS.variables} variables`
      : null;
  const ok = Object.keys(rowErrors).length === 0 && listError === null;
  return { env: ok ? Object.fromEntries(env) : null, rowErrors, listError };
}

type Issue = { message: string; issues?: Issue[] };

/** A refused record key reports "Invalid key in record" with the name's own reasons inside: those say why. */
function firstMessage(issues: readonly Issue[]): string {
  const issue = issues[0];
  if (!issue) return "invalid";
  return issue.issues?.length ? firstMessage(issue.issues) : issue.message;
}

/**
 * Environment variables as NAME / value rows (agents and sessions): controlled, `onChange` gets all the
 * rows; errors show next to their row as soon as a row is filled. Read-only, a plain list.
 */
export function EnvEditor({
  rows,
  onChange,
  readOnly = false,
  help = ENV_HELP,
}: {
  rows: readonly EnvRow[];
  /** Absent: read-only. */
  onChange?: (next: EnvRow[]) => void;
  readOnly?: boolean;
  help?: string;
}) {
  const { rowErrors, listError } = checkEnvRows(rows);
  if (readOnly || !onChange) {
    const shown = rows.filter((row) => row.name !== "");
    return shown.length === 0 ? (
      <p className="text-muted-foreground text-sm" data-testid="env-list">
        No variables.
      </p>
    ) : (
      <dl className="grid gap-1 font-mono text-xs" data-testid="env-list">
        {shown.map((row) => (
          <div key={row.key} className="flex min-w-0 gap-1" data-testid="env-variable">
            <dt className="font-medium">{row.name}</dt>
            <dd className="text-muted-foreground min-w-0 break-all">= {row.value}</dd>
          </div>
        ))}
      </dl>
    );
  }

  const update = (key: string, change: Partial<EnvRow>) =>
    onChange(rows.map((row) => (row.key === key ? { ...row, ...change } : row)));
  return (
    <div className="grid gap-2" data-testid="env-editor">
      <p className="text-muted-foreground text-xs">{help}</p>
      {rows.map((row, index) => (
        <EnvRowInputs
          key={row.key}
          row={row}
          position={index + 1}
          error={rowErrors[row.key] ?? null}
          onName={(name) => update(row.key, { name })}
          onValue={(value) => update(row.key, { value })}
          onRemove={() => onChange(rows.filter((other) => other.key !== row.key))}
        />
      ))}
      {listError && (
        <p className="text-destructive text-xs" role="alert">
          {listError}
        </p>
      )}
      <div>
        <Button
          type="button"
          variant="outline"
          size="sm"
          disabled={rows.length >= WORKSPACE_ENV_LIMITS.variables}
          onClick={() => onChange([...rows, { key: `added-${++addedRows}`, name: "", value: "" }])}
        >
          <Plus /> Add variable
        </Button>
      </div>
    </div>
  );
}

function EnvRowInputs({
  row,
  position,
  error,
  onName,
  onValue,
  onRemove,
}: {
  row: EnvRow;
  position: number;
  error: string | null;
  onName: (name: string) => void;
  onValue: (value: string) => void;
  onRemove: () => void;
}) {
  const errorId = useId();
  const label = row.name.trim() || `variable ${position}`;
  return (
    <div className="grid gap-1" data-testid="env-row">
      <div className="grid grid-cols-[minmax(0,2fr)_minmax(0,3fr)_auto] items-center gap-2">
        <Input
          aria-label={`Name of variable ${position}`}
          placeholder="NAME"
          className="font-mono text-xs"
          maxLength={WORKSPACE_ENV_LIMITS.nameLength}
          autoComplete="off"
          spellCheck={false}
          value={row.name}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? errorId : undefined}
          onChange={(event) => onName(event.target.value)}
        />
        <Input
          aria-label={`Value of variable ${position}`}
          placeholder="value"
          className="font-mono text-xs"
          maxLength={WORKSPACE_ENV_LIMITS.valueLength}
          autoComplete="off"
          spellCheck={false}
          value={row.value}
          onChange={(event) => onValue(event.target.value)}
        />
        <Button
          type="button"
          variant="ghost"
          size="icon-sm"
          aria-label={`Remove ${label}`}
          onClick={onRemove}
        >
          <X />
        </Button>
      </div>
      {error && (
        <p id={errorId} className="text-destructive text-xs" role="alert" data-testid="env-row-error">
          {label}: {error}
        </p>
      )}
    </div>
  );
}
