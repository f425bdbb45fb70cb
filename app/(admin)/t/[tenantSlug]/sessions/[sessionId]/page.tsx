import type { Metadata } from "next";
import { SessionDetail } from "./session-detail";

export const metadata: Metadata = { title: "Session" };

export default async function SessionPage({
  params,
  searchParams,
}: {
  params: Promise<{ tenantSlug: string; sessionId: string }>;
  searchParams: Promise<{ restore?: string | string[] }>;
}) {
  const { tenantSlug, sessionId } = await params;
  // A fork lands here with its restore, whose progress the page shows until the workspace is filled.
  const { restore } = await searchParams;
  return (
    <SessionDetail
      tenantSlug={tenantSlug}
      sessionId={sessionId}
      restoreId={typeof restore === "string" && restore ? restore : null}
    />
  );
}
