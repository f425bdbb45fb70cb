"use client";

import { useParams } from "next/navigation";
import { NotFoundView } from "@/app/_components/not-found-view";

/** A page under a tenant that does not exist (an unknown path, agent, session or workspace). */
export default function TenantNotFound() {
  const { tenantSlug } = useParams<{ tenantSlug: string }>();
  return <NotFoundView backHref={`/t/${encodeURIComponent(tenantSlug)}`} backLabel="Back to overview" />;
}
