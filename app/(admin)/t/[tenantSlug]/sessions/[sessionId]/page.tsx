import type { Metadata } from "next";
import { SessionDetail } from "./session-detail";

export const metadata: Metadata = { title: "Session" };

export default async function SessionPage({
  params,
}: {
  params: Promise<{ tenantSlug: string; sessionId: string }>;
}) {
  const { tenantSlug, sessionId } = await params;
  return <SessionDetail tenantSlug={tenantSlug} sessionId={sessionId} />;
}
