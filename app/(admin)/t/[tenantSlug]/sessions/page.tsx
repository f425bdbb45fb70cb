import type { Metadata } from "next";
import { SessionsTable } from "./sessions-table";

export const metadata: Metadata = { title: "Sessions" };

export default async function SessionsPage({
  params,
  searchParams,
}: {
  params: Promise<{ tenantSlug: string }>;
  searchParams: Promise<{ agent?: string | string[] }>;
}) {
  const { tenantSlug } = await params;
  const { agent } = await searchParams;
  return (
    <>
      <h1>Sessions</h1>
      <p className="lead">
        Agent conversations and the workspace each one is bound to (fixed when the session is created).
      </p>
      <SessionsTable tenantSlug={tenantSlug} agentId={typeof agent === "string" && agent ? agent : null} />
    </>
  );
}
