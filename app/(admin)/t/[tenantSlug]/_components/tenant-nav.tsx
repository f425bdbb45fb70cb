"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";

const SECTIONS = [
  { segment: "", label: "Overview" },
  { segment: "agents", label: "Agents" },
  { segment: "sessions", label: "Sessions" },
  { segment: "workspaces", label: "Workspaces" },
  { segment: "jobs", label: "Jobs" },
  { segment: "audit", label: "Audit" },
  { segment: "api-keys", label: "API keys" },
  { segment: "members", label: "Members" },
] as const;

export function TenantNav({ tenantSlug }: { tenantSlug: string }) {
  const pathname = usePathname();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  return (
    <nav className="nav" aria-label="Tenant">
      {SECTIONS.map(({ segment, label }) => {
        const href = segment ? `${base}/${segment}` : base;
        const isCurrent = segment ? pathname.startsWith(href) : pathname === base;
        return (
          <Link key={label} href={href} aria-current={isCurrent ? "page" : undefined}>
            {label}
          </Link>
        );
      })}
    </nav>
  );
}
