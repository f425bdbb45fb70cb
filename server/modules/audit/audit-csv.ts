import type { AuditLogDTO } from "@/server/modules/audit/audit.types";

/** The reason a failed action gave, when its details carry one (`error`, `reason`, `code`). */
export function failureReason(entry: AuditLogDTO): string | null {
  if (entry.outcome === "success" || !entry.details || typeof entry.details !== "object") return null;
  const details = entry.details as Record<string, unknown>;
  for (const key of ["error", "reason", "message", "code"]) {
    if (typeof details[key] === "string" && details[key]) return details[key];
  }
  return null;
}

/** RFC 4180 quoting; a leading = + - @ is prefixed with ' so spreadsheets do not run it as a formula. */
function cell(value: string): string {
  const safe = /^[=+\-@]/.test(value) ? `'${value}` : value;
  return /[",\n\r]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The audit entries as CSV, one row each, with the actor's name and the details as JSON. */
export function auditCsv(entries: AuditLogDTO[], actorLabel: (entry: AuditLogDTO) => string): string {
  const header = [
    "at",
    "action",
    "actor",
    "actor_type",
    "actor_id",
    "target_type",
    "target_id",
    "outcome",
    "reason",
    "ip",
    "details",
  ];
  const rows = entries.map((entry) => [
    entry.at.toISOString(),
    entry.action,
    actorLabel(entry),
    entry.actorType,
    entry.actorId ?? "",
    entry.targetType ?? "",
    entry.targetId ?? "",
    entry.outcome,
    failureReason(entry) ?? "",
    entry.ip ?? "",
    entry.details == null ? "" : JSON.stringify(entry.details),
  ]);
  return [header, ...rows].map((row) => row.map(cell).join(",")).join("\r\n") + "\r\n";
}
