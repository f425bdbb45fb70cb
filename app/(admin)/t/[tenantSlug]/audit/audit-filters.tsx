"use client";

import { X } from "lucide-react";
import { Button } from "@/app/_components/ui/button";
import { Input } from "@/app/_components/ui/input";
import { FilterSelect } from "../_components/filter-select";

/** The audit page's filters as the form holds them ("" = any); `auditFilterInput` turns them into the API's. */
export type AuditFilterState = {
  action: string;
  /** `<actorType>:<actorId>` of one actor. */
  actor: string;
  outcome: string;
  targetType: string;
  targetId: string;
  /** `datetime-local` values (the browser's time zone). */
  from: string;
  to: string;
};

export const NO_AUDIT_FILTERS: AuditFilterState = {
  action: "",
  actor: "",
  outcome: "",
  targetType: "",
  targetId: "",
  from: "",
  to: "",
};

type Facets = {
  actions: string[];
  targetTypes: string[];
  actors: { type: string; id: string | null; name: string }[];
};

const ACTOR_TYPES = ["user", "api_key", "system"] as const;
const OUTCOMES = ["success", "failure"] as const;

export function auditFilterInput(filters: AuditFilterState) {
  const [actorType, ...actorId] = filters.actor.split(":");
  const type = ACTOR_TYPES.find((value) => value === actorType);
  const date = (value: string) => (value ? new Date(value) : undefined);
  const from = date(filters.from);
  const to = date(filters.to);
  const outcome = OUTCOMES.find((value) => value === filters.outcome);
  return {
    ...(filters.action ? { action: filters.action } : {}),
    ...(type ? { actorType: type } : {}),
    ...(type && actorId.join(":") ? { actorId: actorId.join(":") } : {}),
    ...(outcome ? { outcome } : {}),
    ...(filters.targetType ? { targetType: filters.targetType } : {}),
    ...(filters.targetId.trim() ? { targetId: filters.targetId.trim() } : {}),
    ...(from && !Number.isNaN(from.getTime()) ? { from } : {}),
    ...(to && !Number.isNaN(to.getTime()) ? { to } : {}),
  };
}

export function AuditFilters({
  value,
  onChange,
  facets,
}: {
  value: AuditFilterState;
  onChange: (next: AuditFilterState) => void;
  facets: Facets | undefined;
}) {
  const set = (patch: Partial<AuditFilterState>) => onChange({ ...value, ...patch });
  const any = Object.values(value).some(Boolean);
  return (
    <>
      <FilterSelect
        label="Filter by action"
        value={value.action}
        onChange={(action) => set({ action })}
        anyLabel="All actions"
        className="w-44"
        options={(facets?.actions ?? []).map((action) => ({ value: action, label: action }))}
      />
      <FilterSelect
        label="Filter by actor"
        value={value.actor}
        onChange={(actor) => set({ actor })}
        anyLabel="All actors"
        className="w-52"
        options={(facets?.actors ?? []).map((actor) => ({
          value: `${actor.type}:${actor.id ?? ""}`,
          label: actor.name,
        }))}
      />
      <FilterSelect
        label="Filter by outcome"
        value={value.outcome}
        onChange={(outcome) => set({ outcome })}
        anyLabel="Any outcome"
        className="w-36"
        options={[
          { value: "success", label: "success" },
          { value: "failure", label: "failure" },
        ]}
      />
      <FilterSelect
        label="Filter by target type"
        value={value.targetType}
        onChange={(targetType) => set({ targetType })}
        anyLabel="Any target"
        className="w-36"
        options={(facets?.targetTypes ?? []).map((type) => ({ value: type, label: type }))}
      />
      <Input
        aria-label="Target id"
        placeholder="Target id"
        value={value.targetId}
        onChange={(event) => set({ targetId: event.target.value })}
        className="h-8 w-44"
      />
      <Input
        type="datetime-local"
        aria-label="From"
        title="From"
        value={value.from}
        onChange={(event) => set({ from: event.target.value })}
        className="h-8 w-52"
      />
      <Input
        type="datetime-local"
        aria-label="To"
        title="To"
        value={value.to}
        onChange={(event) => set({ to: event.target.value })}
        className="h-8 w-52"
      />
      {any && (
        <Button variant="ghost" size="sm" onClick={() => onChange(NO_AUDIT_FILTERS)}>
          <X /> Clear
        </Button>
      )}
    </>
  );
}
