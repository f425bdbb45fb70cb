"use client";

import { useQuery } from "@tanstack/react-query";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Card, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";

/** The newest deliveries, each with every attempt's status code and the start of the response. */
export function WebhookDeliveries({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const deliveries = useQuery({
    ...trpc.operations.webhookDeliveries.queryOptions({ tenantSlug }),
    // Retries land over seconds to minutes: keep the list moving while something is pending.
    refetchInterval: (query) => (query.state.data?.some((d) => d.status === "pending") ? 2_000 : false),
  });
  return (
    <Card aria-labelledby="deliveries-heading">
      <CardHeader>
        <div>
          <CardTitle id="deliveries-heading">Deliveries</CardTitle>
          <CardDescription>The 50 newest, each attempt with its status and response.</CardDescription>
        </div>
      </CardHeader>
      {deliveries.error && (
        <div className="p-5">
          <Alert>{deliveries.error.message}</Alert>
        </div>
      )}
      {deliveries.data?.length === 0 && <p className="text-muted-foreground px-5 pb-5 text-sm">None yet.</p>}
      {deliveries.data && deliveries.data.length > 0 && (
        <Table aria-label="Webhook deliveries">
          <TableHeader>
            <TableRow>
              <TableHead>Event</TableHead>
              <TableHead>Status</TableHead>
              <TableHead>Attempts</TableHead>
              <TableHead>Created</TableHead>
            </TableRow>
          </TableHeader>
          <TableBody>
            {deliveries.data.map((delivery) => (
              <TableRow key={delivery.id} data-testid="webhook-delivery">
                <TableCell>
                  <code className="text-xs">{delivery.event}</code>
                </TableCell>
                <TableCell>
                  <StateBadge state={delivery.status} />
                </TableCell>
                <TableCell>
                  <ol className="flex flex-col gap-0.5 text-xs">
                    {delivery.attempts.map((attempt) => (
                      <li key={attempt.attempt}>
                        #{attempt.attempt}: {attempt.statusCode ?? "no response"} ({attempt.durationMs} ms){" "}
                        <span className="text-muted-foreground break-all">
                          {attempt.response.slice(0, 120)}
                        </span>
                      </li>
                    ))}
                  </ol>
                </TableCell>
                <TableCell>
                  <RelativeTime value={delivery.createdAt} />
                </TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
      )}
    </Card>
  );
}
