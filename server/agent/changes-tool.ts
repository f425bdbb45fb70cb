import { z } from "zod";
import type { AgentTool, AgentToolResult } from "./ports";
import { guarded, invalidInput } from "./tool-failures";

/** What the `Changes` tool asks of the turn's workspace (the checkpoint service answers it). */
export type WorkspaceChangesPort = (query: {
  turnsBack: number;
  path?: string | undefined;
  signal?: AbortSignal | undefined;
}) => Promise<{
  changes: { path: string; kind: "added" | "changed" | "removed"; size: number | null }[];
  diff: { binary: boolean; diff: string | null } | null;
}>;

const ZChangesInput = z
  .object({
    turns_back: z.number().int().min(0).max(100).default(0),
    path: z.string().min(1).max(4_096).optional(),
  })
  .strict();

/** The listing names at most this many files; the rest is counted. */
const MAX_LISTED = 200;

/**
 * `Changes`: what changed in the workspace since the end of the previous turn (or of an earlier one),
 * Bash's changes included, and one file's diff. Berth records the folder at the end of every turn, so
 * the agent can check its own work without running git in a folder that may not be a repository.
 */
export function createChangesTool(changesOf: WorkspaceChangesPort): AgentTool {
  return {
    name: "Changes",
    description:
      "Lists the files added, changed and removed in the workspace since the end of the previous turn " +
      "(turns_back 0, the default) or since the end of an earlier turn (turns_back N), including changes " +
      "made by Bash. Give `path` to also get that file's unified diff.",
    inputSchema: {
      type: "object",
      properties: {
        turns_back: {
          type: "integer",
          minimum: 0,
          maximum: 100,
          description: "0: since the previous turn ended; N: since the turn N before that ended",
        },
        path: { type: "string", description: "A file (relative to the workspace) to show the diff of" },
      },
      additionalProperties: false,
    },
    async execute(raw, { signal }): Promise<AgentToolResult> {
      const parsed = ZChangesInput.safeParse(raw ?? {});
      if (!parsed.success) return invalidInput("Changes", parsed.error);
      const { turns_back: turnsBack, path } = parsed.data;
      return guarded(signal, async () => {
        const { changes, diff } = await changesOf({ turnsBack, path, signal });
        const lines = changes
          .slice(0, MAX_LISTED)
          .map(
            (change) =>
              `${change.kind.padEnd(8)} ${change.path}${change.size === null ? "" : ` (${change.size} B)`}`,
          );
        if (changes.length > MAX_LISTED) lines.push(`… and ${changes.length - MAX_LISTED} more`);
        const listing = lines.length === 0 ? "No changes." : lines.join("\n");
        if (path === undefined) return { content: listing, isError: false };
        const detail =
          diff === null
            ? `${path} did not change.`
            : diff.binary
              ? `${path} is binary or too large to diff.`
              : (diff.diff ?? "");
        return { content: `${listing}\n\n${detail}`, isError: false };
      });
    },
  };
}
