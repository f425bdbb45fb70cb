import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { assertMayActOnWorkspace } from "@/server/modules/workspace/workspace-access";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { auditActorNames } from "@/server/modules/audit/audit.data";
import { AppError } from "@/server/shared/errors";
import {
  recentProvisionRuns,
  type TimelineCursor,
  workspaceStageSummary,
  workspaceTimelinePage,
} from "./workspace-timings.data";
import type { Db } from "@/server/db";

export const ZWorkspaceTimingsView = z.object({
  stages: z.array(
    z.object({
      kind: z.string(),
      path: z.string(),
      stage: z.string(),
      count: z.number().int(),
      p50: z.number(),
      p95: z.number(),
      maxMs: z.number().int(),
      lastAt: z.date(),
    }),
  ),
  provisions: z.array(
    z.object({
      at: z.date(),
      path: z.string(),
      ok: z.boolean(),
      queuedMs: z.number().int().nullable(),
      machineMs: z.number().int().nullable(),
      gatewayMs: z.number().int().nullable(),
      totalMs: z.number().int().nullable(),
    }),
  ),
});

export const ZTimelineQuery = z.object({
  limit: z.number().int().min(1).max(200).default(50),
  /** The `earlier` cursor of the previous page (named `cursor` for tRPC's infinite queries). */
  cursor: z.string().min(1).max(200).optional(),
});

const ZTimelineEntry = z.discriminatedUnion("source", [
  z.object({
    source: z.literal("event"),
    key: z.string(),
    at: z.date(),
    kind: z.string(),
    reason: z.string().nullable(),
    /** "user:<id>", "api_key:<id>", "system…": the stored actor. */
    actor: z.string(),
    /** The actor as people read it (the user's email, "key <name>"); null for the system or one deleted. */
    actorName: z.string().nullable(),
    transition: z.string().nullable(),
  }),
  z.object({
    source: z.literal("stage"),
    key: z.string(),
    at: z.date(),
    kind: z.string(),
    stage: z.string(),
    path: z.string(),
    durationMs: z.number().int(),
    ok: z.boolean(),
  }),
]);

export const ZWorkspaceTimelineView = z.object({
  /** Oldest first (time order), the page of entries that came just before `before`. */
  items: z.array(ZTimelineEntry),
  /** The cursor of the page before this one, null when this page reaches the start. */
  earlier: z.string().nullable(),
});

const RECENT_PROVISIONS = 30;

/** A workspace event's actor string ("user:<id>", "api_key:<id>", "system…") as the audit's actor names take it. */
function storedActor(actor: string): { type: string; id: string | null } {
  const separator = actor.indexOf(":");
  return separator < 0
    ? { type: actor, id: null }
    : { type: actor.slice(0, separator), id: actor.slice(separator + 1) };
}

function transitionOf(data: unknown): string | null {
  if (!data || typeof data !== "object") return null;
  const { from, to } = data as { from?: unknown; to?: unknown };
  return typeof from === "string" && typeof to === "string" ? `${from} → ${to}` : null;
}

// The cursor is opaque to clients: base64url of "<epoch ms>|<rank>|<key>".
const ZCursor = z.tuple([z.coerce.number().int().min(0), z.coerce.number().int().min(0).max(1), z.string()]);

function encodeCursor(cursor: TimelineCursor): string {
  return Buffer.from(`${cursor.at.getTime()}|${cursor.rank}|${cursor.key}`).toString("base64url");
}

function decodeCursor(raw: string): TimelineCursor {
  const parts = Buffer.from(raw, "base64url").toString("utf8").split("|");
  const parsed = ZCursor.safeParse(parts.length === 3 ? parts : []);
  if (!parsed.success) {
    throw new AppError("BAD_REQUEST", "unreadable timeline cursor", { userMessage: "Invalid cursor." });
  }
  const [at, rank, key] = parsed.data;
  return { at: new Date(at), rank, key };
}

async function assertReadable(scope: TenantScope, workspaceId: string, db: Db): Promise<void> {
  assertCan(scope, "workspace:read");
  // Another tenant's workspace is NOT_FOUND here, and a member sees only their own sessions' ones.
  await assertMayActOnWorkspace(scope, await getWorkspace(scope, workspaceId, db), db);
}

/** The workspace page's stage timings: per-stage figures and its latest provisions stage by stage. */
export async function workspaceTimings(scope: TenantScope, workspaceId: string, db: Db) {
  await assertReadable(scope, workspaceId, db);
  const [stages, provisions] = await Promise.all([
    workspaceStageSummary(scope, workspaceId, db),
    recentProvisionRuns(scope, workspaceId, RECENT_PROVISIONS, db),
  ]);
  return { stages, provisions: provisions.toReversed() };
}

/** The workspace's lifecycle in time order, a bounded page at a time going back from now (or `before`). */
export async function workspaceTimeline(
  scope: TenantScope,
  workspaceId: string,
  input: z.output<typeof ZTimelineQuery>,
  db: Db,
): Promise<z.output<typeof ZWorkspaceTimelineView>> {
  await assertReadable(scope, workspaceId, db);
  const before = input.cursor ? decodeCursor(input.cursor) : null;
  // One more than asked: it says whether an earlier page exists.
  const rows = await workspaceTimelinePage(scope, workspaceId, { before, limit: input.limit + 1 }, db);
  const page = rows.slice(0, input.limit);
  const oldest = page.at(-1);
  const names = await auditActorNames(
    scope,
    page.flatMap((row) => (row.source === "event" ? [storedActor(row.actor)] : [])),
    db,
  );
  return {
    items: page.toReversed().map((row) =>
      row.source === "event"
        ? {
            source: "event" as const,
            key: `e:${row.key}`,
            at: row.at,
            kind: row.kind,
            reason: row.reason,
            actor: row.actor,
            actorName: names.get(row.actor) ?? null,
            transition: transitionOf(row.data),
          }
        : {
            source: "stage" as const,
            key: `s:${row.key}`,
            at: row.at,
            kind: row.kind,
            stage: row.stage,
            path: row.path,
            durationMs: row.durationMs,
            ok: row.ok,
          },
    ),
    earlier:
      rows.length > input.limit && oldest
        ? encodeCursor({ at: oldest.at, rank: oldest.rank, key: oldest.key })
        : null,
  };
}
