"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { BookMarked, Plug, Sparkles, X } from "lucide-react";
import Link from "next/link";
import { type ReactNode, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { TMcpDeclaration } from "@/server/workspace/mcp/types";
import type { SeedSkill } from "@/server/workspace/skills/agent-seed";
import { McpDeclarationDialog, mcpSummary } from "../_components/mcp-declaration-dialog";
import { type AgentDefaultsValue, sameContent } from "./agent-form";

// One page of the library per kind: the list's maximum page.
const LIBRARY_LIMIT = 200;

/**
 * The defaults an agent's workspaces start with (`defaultMcpConfigs`, `defaultSkills`): every MCP scope of
 * the agent that never changed its MCPs gets the servers, its skill partition gets the skills once. MCP
 * servers are declared here (stdio or HTTP) or picked from the tenant library; skills come from the library
 * (upload them there). Each row says whether it is the library's version. Controlled: `onChange` gets the
 * whole new value, which the form sends on save.
 */
export function AgentDefaultsEditor({
  tenantSlug,
  agentId,
  value,
  onChange,
  readOnly,
}: {
  tenantSlug: string;
  /** The stored agent being edited (absent in the create form). */
  agentId?: string;
  value: AgentDefaultsValue;
  onChange: (next: AgentDefaultsValue) => void;
  readOnly: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const libraryMcps = useQuery(
    trpc.library.list.queryOptions({ tenantSlug, kind: "MCP", limit: LIBRARY_LIMIT }),
  );
  const librarySkills = useQuery(
    trpc.library.list.queryOptions({ tenantSlug, kind: "SKILL", limit: LIBRARY_LIMIT }),
  );
  const [mcpChoice, setMcpChoice] = useState("");
  const [skillChoice, setSkillChoice] = useState("");
  const [error, setError] = useState<string | null>(null);
  const libraryHref = `/t/${encodeURIComponent(tenantSlug)}/library`;

  const mcpEntries = libraryMcps.data?.items ?? [];
  const skillEntries = librarySkills.data?.items ?? [];
  const taken = (names: { name: string }[], name: string) => names.some((item) => item.name === name);

  function addMcp(declaration: TMcpDeclaration) {
    if (taken(value.mcps, declaration.name)) throw new Error(`"${declaration.name}" is already a default.`);
    onChange({ ...value, mcps: [...value.mcps, declaration] });
  }

  function addLibraryMcp() {
    const entry = mcpEntries.find((item) => item.id === mcpChoice);
    if (!entry?.declaration) return;
    setError(null);
    try {
      addMcp(entry.declaration);
      setMcpChoice("");
    } catch (failure) {
      setError((failure as Error).message);
    }
  }

  async function addLibrarySkill() {
    setError(null);
    const entry = skillEntries.find((item) => item.id === skillChoice);
    if (!entry) return;
    if (taken(value.skills, entry.name)) return setError(`"${entry.name}" is already a default skill.`);
    try {
      // The list carries a summary; the agent's default is the whole skill, as the library holds it.
      const detail = await queryClient.fetchQuery(
        trpc.library.get.queryOptions({ tenantSlug, entryId: entry.id }),
      );
      if (!detail.skillContent) return;
      onChange({ ...value, skills: [...value.skills, detail.skillContent] });
      setSkillChoice("");
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    }
  }

  return (
    <div className="grid gap-4 rounded-lg border p-4" data-testid="agent-defaults">
      <div>
        <h3 className="text-sm font-medium">Workspace defaults</h3>
        <p className="text-muted-foreground text-xs">
          What this agent&apos;s workspaces start with. A change reaches a workspace at its next use; MCP
          scopes that added or removed servers themselves keep their own list.
        </p>
      </div>

      <DefaultList
        title="Default MCP servers"
        icon={Plug}
        empty="None."
        items={value.mcps.map((mcp) => {
          const entry = mcpEntries.find((candidate) => candidate.name === mcp.name);
          return {
            key: mcp.name,
            name: mcp.name,
            detail: `${mcp.mcp_config.type === "stdio_mcp" ? "stdio" : "HTTP"} · ${mcpSummary(mcp)}`,
            badge: entry ? <LibraryBadge identical={sameContent(entry.declaration, mcp)} /> : null,
          };
        })}
        readOnly={readOnly}
        onRemove={(name) => onChange({ ...value, mcps: value.mcps.filter((mcp) => mcp.name !== name) })}
        removeLabel={(name) => `Remove MCP server ${name}`}
      />
      {!readOnly && (
        <div className="flex flex-wrap items-end gap-2">
          <McpDeclarationDialog
            title="Default MCP server"
            description="Every workspace of this agent starts with it. Saved with the agent."
            submitLabel="Add to defaults"
            onAdd={addMcp}
          />
          <LibraryPicker
            label="Library MCP server"
            value={mcpChoice}
            onChange={setMcpChoice}
            options={mcpEntries.map((entry) => ({ id: entry.id, label: entry.name }))}
            onAdd={addLibraryMcp}
            addLabel="Add MCP server from the library"
          />
        </div>
      )}

      <DefaultList
        title="Default skills"
        icon={Sparkles}
        empty="None."
        items={value.skills.map((skill: SeedSkill) => {
          const entry = skillEntries.find((candidate) => candidate.name === skill.name);
          // Skills are compared on the server (the list has no content): known for the stored agent only.
          const usage = agentId ? entry?.usedBy.find((use) => use.agentId === agentId) : undefined;
          return {
            key: skill.name,
            name: skill.name,
            detail: skill.description,
            badge: entry ? <LibraryBadge identical={usage?.identical ?? null} /> : null,
          };
        })}
        readOnly={readOnly}
        onRemove={(name) =>
          onChange({ ...value, skills: value.skills.filter((skill) => skill.name !== name) })
        }
        removeLabel={(name) => `Remove skill ${name}`}
      />
      {!readOnly && (
        <LibraryPicker
          label="Library skill"
          value={skillChoice}
          onChange={setSkillChoice}
          options={skillEntries.map((entry) => ({
            id: entry.id,
            label: `${entry.name} — ${entry.skill?.description ?? ""}`,
          }))}
          onAdd={() => void addLibrarySkill()}
          addLabel="Add skill from the library"
        />
      )}
      {!readOnly &&
        mcpEntries.length + skillEntries.length === 0 &&
        libraryMcps.data &&
        librarySkills.data && (
          <p className="text-muted-foreground text-xs">
            The{" "}
            <Link href={libraryHref} className="underline">
              library
            </Link>{" "}
            is empty: keep vetted MCP servers and skills there to pick them here.
          </p>
        )}
      {error && <Alert>{error}</Alert>}
    </div>
  );
}

function LibraryBadge({ identical }: { identical: boolean | null }) {
  if (identical === false)
    return (
      <Badge tone="warning" title="Same name as a library entry, other settings">
        differs from library
      </Badge>
    );
  return (
    <Badge tone="info">
      <BookMarked /> library
    </Badge>
  );
}

function DefaultList({
  title,
  icon: Icon,
  empty,
  items,
  readOnly,
  onRemove,
  removeLabel,
}: {
  title: string;
  icon: typeof Plug;
  empty: string;
  items: { key: string; name: string; detail: string; badge: ReactNode }[];
  readOnly: boolean;
  onRemove: (name: string) => void;
  removeLabel: (name: string) => string;
}) {
  return (
    <div className="grid gap-2">
      <h4 className="text-muted-foreground flex items-center gap-1.5 text-xs font-medium tracking-wide uppercase">
        <Icon className="size-3.5" aria-hidden /> {title}
      </h4>
      {items.length === 0 ? (
        <p className="text-muted-foreground text-sm">{empty}</p>
      ) : (
        <ul className="divide-y rounded-md border" aria-label={title}>
          {items.map((item) => (
            <li key={item.key} className="flex items-center gap-3 px-3 py-2" data-testid="default-item">
              <div className="min-w-0 flex-1">
                <div className="flex flex-wrap items-center gap-2">
                  <span className="font-mono text-sm">{item.name}</span>
                  {item.badge}
                </div>
                <div className="text-muted-foreground truncate text-xs">{item.detail}</div>
              </div>
              {!readOnly && (
                <Button
                  type="button"
                  variant="ghost"
                  size="sm"
                  aria-label={removeLabel(item.name)}
                  onClick={() => onRemove(item.name)}
                >
                  <X />
                </Button>
              )}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function LibraryPicker({
  label,
  value,
  onChange,
  options,
  onAdd,
  addLabel,
}: {
  label: string;
  value: string;
  onChange: (id: string) => void;
  options: { id: string; label: string }[];
  onAdd: () => void;
  addLabel: string;
}) {
  return (
    <div className="flex min-w-60 flex-1 items-end gap-2">
      <label className="grid flex-1 gap-1 text-xs font-medium">
        {label}
        <Select
          value={value}
          onChange={(event) => onChange(event.target.value)}
          disabled={options.length === 0}
        >
          <option value="">{options.length === 0 ? "Library is empty" : "Choose…"}</option>
          {options.map((option) => (
            <option key={option.id} value={option.id}>
              {option.label}
            </option>
          ))}
        </Select>
      </label>
      <Button
        type="button"
        variant="outline"
        size="sm"
        aria-label={addLabel}
        disabled={!value}
        onClick={onAdd}
      >
        Add
      </Button>
    </div>
  );
}
