import { describe, expect, it } from "vitest";
import { auditCsv, failureReason } from "@/server/modules/audit/audit-csv";
import type { AuditLogDTO } from "@/server/modules/audit/audit.types";

const entry = (patch: Partial<AuditLogDTO>): AuditLogDTO => ({
  id: "a1",
  actorType: "user",
  actorId: "u1",
  action: "agent.create",
  targetType: "agent",
  targetId: "ag1",
  outcome: "success",
  ip: null,
  userAgent: null,
  details: null,
  at: new Date("2026-12-01T10:00:00.000Z"),
  ...patch,
});

describe("audit CSV export", () => {
  it("quotes commas, quotes and newlines, and defuses spreadsheet formulas", () => {
    const csv = auditCsv(
      [
        entry({ outcome: "failure", details: { error: 'bad "key", try\nagain' } }),
        entry({ action: "=HYPERLINK(1)" }),
      ],
      () => "ada@example.test",
    );
    const lines = csv.split("\r\n");
    expect(lines[0]).toBe(
      "at,action,actor,actor_type,actor_id,target_type,target_id,outcome,reason,ip,details",
    );
    expect(csv).toContain('"bad ""key"", try\nagain"');
    expect(csv).toContain(",'=HYPERLINK(1),");
    expect(
      lines[1]?.startsWith(
        "2026-12-01T10:00:00.000Z,agent.create,ada@example.test,user,u1,agent,ag1,failure,",
      ),
    ).toBe(true);
  });

  it("gives a failure's reason from its details, and none for a success", () => {
    expect(failureReason(entry({ outcome: "failure", details: { code: "FORBIDDEN" } }))).toBe("FORBIDDEN");
    expect(failureReason(entry({ details: { error: "ignored" } }))).toBeNull();
  });
});
