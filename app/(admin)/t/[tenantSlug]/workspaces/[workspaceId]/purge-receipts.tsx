"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";
import { formatDate } from "../workspace-format";

const POLL_MS = 1_000;

/** What purges of this workspace deleted. Admin-only in the API: others get a plain explanation. */
export function PurgeReceipts({
  tenantSlug,
  workspaceId,
  waitForReceipt,
}: {
  tenantSlug: string;
  workspaceId: string;
  waitForReceipt: boolean;
}) {
  const trpc = useTRPC();
  const receipts = useQuery(
    trpc.workspace.purgeReceipts.queryOptions(
      { tenantSlug, targetType: "workspace", targetId: workspaceId, limit: 20 },
      {
        retry: false,
        // The receipt is written by the purge job after the state change: poll until it is there.
        refetchInterval: (query) => (waitForReceipt && query.state.data?.length === 0 ? POLL_MS : false),
      },
    ),
  );
  return (
    <section className="panel" aria-labelledby="receipts-heading">
      <h2 id="receipts-heading">Purge receipts</h2>
      {receipts.error ? (
        <p className="muted">
          {receipts.error.data?.code === "FORBIDDEN"
            ? "Purge receipts are visible to admins only."
            : receipts.error.message}
        </p>
      ) : !receipts.data ? (
        <p className="muted">Loading…</p>
      ) : receipts.data.length === 0 ? (
        <p className="muted">Never purged.</p>
      ) : (
        receipts.data.map((receipt) => (
          <div key={receipt.id} data-testid="purge-receipt" style={{ marginBottom: 12 }}>
            <div>
              {formatDate(receipt.at)} by <span className="mono">{receipt.actor}</span>
            </div>
            <pre className="mono" style={{ whiteSpace: "pre-wrap", fontSize: 12, margin: "6px 0 0" }}>
              {JSON.stringify(receipt.deleted, null, 2)}
            </pre>
          </div>
        ))
      )}
    </section>
  );
}
