import type { Metadata } from "next";
import Link from "next/link";
import { SessionDetail } from "./session-detail";

export const metadata: Metadata = { title: "Session" };

export default async function SessionPage({
  params,
}: {
  params: Promise<{ tenantSlug: string; sessionId: string }>;
}) {
  const { tenantSlug, sessionId } = await params;
  return (
    <>
      <p className="muted">
        <Link href={`/t/${encodeURIComponent(tenantSlug)}/sessions`}>← Sessions</Link>
      </p>
      <SessionDetail tenantSlug={tenantSlug} sessionId={sessionId} />
    </>
  );
}
