import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { parseInput } from "@/server/shared/parse-input";
import { auditActorNames, auditFacets, listAuditLogs } from "./audit.data";
import { auditCsv, failureReason } from "./audit-csv";
import { type AuditLogDTO, type AuditLogView, ZAuditFilters, type TAuditFilters } from "./audit.types";
import type { Page } from "@/server/shared/page";

/** The most rows one CSV export holds (newest first); `truncated` says when the filters matched more. */
const AUDIT_EXPORT_MAX_ROWS = 10_000;
const EXPORT_PAGE = 200;

const actorKey = (entry: { actorType: string; actorId: string | null }) =>
  `${entry.actorType}:${entry.actorId}`;

/** An actor as a person reads it: the email or key name, else the type and the start of the id. */
function actorLabelOf(entry: AuditLogDTO, names: Map<string, string>): string {
  if (!entry.actorId) return entry.actorType;
  return names.get(actorKey(entry)) ?? `${entry.actorType} ${entry.actorId.slice(0, 8)}`;
}

/**
 * `audit.list | facets | exportCsv`: the tenant's audit log filtered on the server (actor, action, target,
 * outcome, time range), with actors named (user emails, API key names) and failure reasons pulled out of
 * the details. The CSV export reads the same filtered rows as the list.
 */
export function createAuditService(db: Db) {
  async function view(scope: TenantScope, entries: AuditLogDTO[]): Promise<AuditLogView[]> {
    const names = await auditActorNames(
      scope,
      entries.map((entry) => ({ type: entry.actorType, id: entry.actorId })),
      db,
    );
    return entries.map((entry) => ({
      ...entry,
      actorName: entry.actorId ? (names.get(actorKey(entry)) ?? null) : null,
      reason: failureReason(entry),
    }));
  }

  return {
    async list(
      scope: TenantScope,
      raw: TAuditFilters & { limit?: number; cursor?: string },
    ): Promise<Page<AuditLogView>> {
      const filters = parseInput(ZAuditFilters, raw);
      const page = await listAuditLogs(scope, { ...filters, limit: raw.limit, cursor: raw.cursor }, db);
      return { items: await view(scope, page.items), nextCursor: page.nextCursor };
    },

    /** The actions and actors (named) the filters can pick from. */
    async facets(scope: TenantScope) {
      const { actions, targetTypes, actors } = await auditFacets(scope, db);
      const names = await auditActorNames(scope, actors, db);
      return {
        actions,
        targetTypes,
        actors: actors
          .map((actor) => ({
            type: actor.type,
            id: actor.id,
            name: actor.id
              ? (names.get(`${actor.type}:${actor.id}`) ?? `${actor.type} ${actor.id.slice(0, 8)}`)
              : actor.type,
          }))
          .sort((a, b) => a.name.localeCompare(b.name)),
      };
    },

    /** The filtered log as CSV (RFC 4180, formula-safe), at most AUDIT_EXPORT_MAX_ROWS rows. */
    async exportCsv(scope: TenantScope, raw: TAuditFilters) {
      const filters = parseInput(ZAuditFilters, raw);
      const rows: AuditLogDTO[] = [];
      let cursor: string | undefined;
      let truncated = false;
      for (;;) {
        const page = await listAuditLogs(scope, { ...filters, limit: EXPORT_PAGE, cursor }, db);
        rows.push(...page.items);
        if (!page.nextCursor) break;
        if (rows.length >= AUDIT_EXPORT_MAX_ROWS) {
          truncated = true;
          break;
        }
        cursor = page.nextCursor;
      }
      const kept = rows.slice(0, AUDIT_EXPORT_MAX_ROWS);
      truncated ||= rows.length > kept.length;
      const names = await auditActorNames(
        scope,
        kept.map((entry) => ({ type: entry.actorType, id: entry.actorId })),
        db,
      );
      return { csv: auditCsv(kept, (entry) => actorLabelOf(entry, names)), rows: kept.length, truncated };
    },
  };
}
