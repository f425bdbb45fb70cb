"use client";

import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { Download, ScrollText } from "lucide-react";
import Link from "next/link";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Input } from "@/app/_components/ui/input";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { AuditLogDTO } from "@/server/modules/audit/audit.types";
import { LoadMore } from "../_components/load-more";
import { auditCsv, failureReason } from "./audit-csv";

const PAGE_SIZE = 100;

/** Where a target lives in the dashboard, when it has a page. */
function targetHref(base: string, entry: AuditLogDTO): string | null {
  if (!entry.targetId) return null;
  const id = encodeURIComponent(entry.targetId);
  switch (entry.targetType ?? "") {
    case "agent":
      return `${base}/agents/${id}`;
    case "session":
      return `${base}/sessions/${id}`;
    case "workspace":
      return `${base}/workspaces/${id}`;
    case "user":
    case "invitation":
      return `${base}/members`;
    case "api_key":
      return `${base}/api-keys`;
    default:
      return null;
  }
}

export function AuditTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const [action, setAction] = useState("");
  const [outcome, setOutcome] = useState("");
  const [actor, setActor] = useState("");
  const [since, setSince] = useState("");
  const audit = useInfiniteQuery(
    trpc.audit.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  // Names, not ids: members by user id, keys by key id.
  const members = useQuery(trpc.member.list.queryOptions({ tenantSlug }));
  const keys = useQuery(trpc.apiKey.list.queryOptions({ tenantSlug, includeRevoked: true }));
  const actorNames = new Map<string, string>([
    ...(members.data ?? []).map((member) => [member.userId, member.email] as [string, string]),
    ...(keys.data ?? []).map((key) => [key.id, `key ${key.name ?? key.id.slice(0, 8)}`] as [string, string]),
  ]);
  const actorLabel = (entry: AuditLogDTO) =>
    entry.actorId
      ? (actorNames.get(entry.actorId) ?? `${entry.actorType} ${entry.actorId.slice(0, 8)}`)
      : entry.actorType;

  const all = audit.data?.pages.flatMap((page) => page.items) ?? [];
  const actions = [...new Set(all.map((entry) => entry.action))].sort();
  const actors = [...new Set(all.map(actorLabel))].sort();
  const sinceTime = since ? new Date(since).getTime() : null;
  // Filters apply to the loaded pages ("Load more" brings older entries in).
  const entries = all.filter(
    (entry) =>
      (!action || entry.action === action) &&
      (!outcome || entry.outcome === outcome) &&
      (!actor || actorLabel(entry) === actor) &&
      (sinceTime === null || entry.at.getTime() >= sinceTime),
  );

  function exportCsv() {
    const blob = new Blob([auditCsv(entries, actorLabel)], { type: "text/csv;charset=utf-8" });
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = `audit-${tenantSlug}-${new Date().toISOString().slice(0, 10)}.csv`;
    link.click();
    URL.revokeObjectURL(url);
  }

  const columns: ColumnDef<AuditLogDTO, unknown>[] = [
    {
      id: "at",
      header: "When",
      accessorFn: (entry) => entry.at.getTime(),
      cell: ({ row: { original: entry } }) => <RelativeTime value={entry.at} />,
    },
    {
      id: "action",
      header: "Action",
      accessorFn: (entry) => entry.action,
      cell: ({ getValue }) => <code className="text-xs">{String(getValue())}</code>,
    },
    { id: "actor", header: "Actor", accessorFn: actorLabel },
    {
      id: "target",
      header: "Target",
      accessorFn: (entry) => `${entry.targetType ?? ""} ${entry.targetId ?? ""}`,
      cell: ({ row: { original: entry } }) => {
        const href = targetHref(base, entry);
        const label = (
          <>
            <span className="text-muted-foreground">{entry.targetType ?? "—"}</span>{" "}
            {entry.targetId && <code className="text-xs">{entry.targetId.slice(0, 12)}</code>}
          </>
        );
        return href ? (
          <Link href={href} className="hover:underline" title={entry.targetId ?? undefined}>
            {label}
          </Link>
        ) : (
          label
        );
      },
    },
    {
      id: "outcome",
      header: "Outcome",
      accessorFn: (entry) => entry.outcome,
      cell: ({ row: { original: entry } }) => (
        <div className="max-w-72">
          <Badge tone={entry.outcome === "success" ? "success" : "danger"} data-testid="audit-outcome">
            {entry.outcome}
          </Badge>
          {failureReason(entry) && (
            <div className="text-muted-foreground mt-1 line-clamp-2 text-xs">{failureReason(entry)}</div>
          )}
        </div>
      ),
    },
  ];

  const select = (
    label: string,
    value: string,
    onChange: (value: string) => void,
    options: string[],
    all: string,
  ) => (
    <div className="w-44">
      <Select
        aria-label={label}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className="[&_select]:h-8"
      >
        <option value="">{all}</option>
        {options.map((option) => (
          <option key={option} value={option}>
            {option}
          </option>
        ))}
      </Select>
    </div>
  );

  return (
    <Card>
      {audit.error ? (
        <div className="p-5">
          <Alert>{audit.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Audit log"
          columns={columns}
          data={entries}
          loading={!audit.data}
          rowTestId="audit-row"
          pageSize={50}
          toolbar={
            <>
              {select("Filter by action", action, setAction, actions, "All actions")}
              {select("Filter by actor", actor, setActor, actors, "All actors")}
              {select("Filter by outcome", outcome, setOutcome, ["success", "failure"], "Any outcome")}
              <Input
                type="datetime-local"
                aria-label="Since"
                value={since}
                onChange={(event) => setSince(event.target.value)}
                className="h-8 w-52"
              />
              <Button
                variant="outline"
                size="sm"
                className="ml-auto"
                onClick={exportCsv}
                disabled={entries.length === 0}
              >
                <Download /> Export CSV
              </Button>
            </>
          }
          empty={<EmptyState icon={ScrollText} title="Nothing recorded yet" />}
        />
      )}
      <LoadMore query={audit} />
    </Card>
  );
}
