import { createTwoFilesPatch } from "diff";
import { replaceUnstorableCharacters } from "@/server/shared/unsafe-strings";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import type { TreeChange, TreeEntry } from "@/server/workspace/checkpoints/tree";

/** Text diffs of files up to this size; larger or binary files are reported without one. */
const MAX_TEXT_DIFF_BYTES = 512 * 1024;

/** One file's change as a unified text diff; `binary` (and no diff) for binary or large files. */
export async function unifiedDiffOf(
  store: CheckpointStore,
  tenantId: string,
  change: TreeChange,
): Promise<{ path: string; kind: TreeChange["kind"]; binary: boolean; diff: string | null }> {
  const { path } = change;
  const before = change.kind === "added" ? null : change.before;
  const after = change.kind === "removed" ? null : change.after;
  const [left, right] = await Promise.all([textOf(store, tenantId, before), textOf(store, tenantId, after)]);
  if (left === undefined || right === undefined) return { path, kind: change.kind, binary: true, diff: null };
  const patch = createTwoFilesPatch(`a/${path}`, `b/${path}`, left ?? "", right ?? "", "", "", {
    context: 3,
  });
  return { path, kind: change.kind, binary: false, diff: replaceUnstorableCharacters(patch).text };
}

/** A file's text, null when absent, undefined when binary or too large to diff. */
async function textOf(
  store: CheckpointStore,
  tenantId: string,
  entry: TreeEntry | null,
): Promise<string | null | undefined> {
  if (!entry) return null;
  if (entry.type === "symlink") return `-> ${entry.target}\n`;
  if (entry.type !== "file" || entry.size > MAX_TEXT_DIFF_BYTES) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of await store.readBlob(tenantId, entry.hash)) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  if (bytes.includes(0)) return undefined;
  return bytes.toString("utf8");
}
