import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { NewSessionButton } from "./new-session";
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
  const agentId = typeof agent === "string" && agent ? agent : null;
  return (
    <>
      <PageHeader
        title="Sessions"
        description="Agent conversations and the workspace each one is bound to (fixed when the session is created)."
        actions={<NewSessionButton tenantSlug={tenantSlug} {...(agentId ? { agentId } : {})} />}
      />
      <SessionsTable tenantSlug={tenantSlug} agentId={agentId} />
    </>
  );
}
