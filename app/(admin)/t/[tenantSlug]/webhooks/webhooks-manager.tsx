"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Webhook } from "lucide-react";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { WEBHOOK_EVENTS } from "@/server/modules/webhook/webhook.types";
import { WebhookDeliveries } from "./webhook-deliveries";

export function WebhooksManager({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const listOptions = trpc.operations.webhooks.queryOptions({ tenantSlug });
  const endpoints = useQuery(listOptions);
  const [created, setCreated] = useState<{ url: string; secret: string } | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: listOptions.queryKey });
  const refreshDeliveries = () =>
    queryClient.invalidateQueries({ queryKey: trpc.operations.webhookDeliveries.queryKey() });

  const create = useMutation(
    trpc.operations.createWebhook.mutationOptions({
      onSuccess: async (result) => {
        setCreated({ url: result.endpoint.url, secret: result.secret });
        await refresh();
      },
    }),
  );
  const remove = useMutation(
    trpc.operations.deleteWebhook.mutationOptions({
      onSuccess: async () => {
        toast.success("Endpoint removed.");
        await Promise.all([refresh(), refreshDeliveries()]);
      },
      onError: (error) => toast.error(error.message),
    }),
  );
  const test = useMutation(
    trpc.operations.testWebhook.mutationOptions({
      onSuccess: async () => {
        toast.success("Test event queued.");
        await refreshDeliveries();
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  const submitOnce = useSubmitOnce();

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const events = WEBHOOK_EVENTS.filter((name) => form.getAll("events").includes(name));
    submitOnce((idempotencyKey) => {
      setCreated(null);
      return create.mutateAsync({
        tenantSlug,
        idempotencyKey,
        url: formString(form, "url"),
        description: formString(form, "description"),
        events,
      });
    });
  }

  return (
    <div className="flex flex-col gap-6">
      <Card aria-labelledby="new-webhook-heading">
        <CardHeader>
          <div>
            <CardTitle id="new-webhook-heading">New endpoint</CardTitle>
            <CardDescription>
              Deliveries carry <code>Berth-Signature: t=…,v1=…</code>, an HMAC-SHA256 of <code>t.body</code>{" "}
              with the endpoint’s secret, which is shown once, right after it is created.
            </CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          <form
            className="flex flex-col gap-3"
            onSubmit={onCreate}
            onChange={resetErrorOnEdit(create)}
            aria-label="Add webhook endpoint"
          >
            <div className="flex flex-wrap items-end gap-3">
              <Field label="URL" className="w-96">
                <Input
                  name="url"
                  type="url"
                  required
                  maxLength={2000}
                  placeholder="https://hooks.example.com/berth"
                />
              </Field>
              <Field label="Description" className="w-64">
                <Input name="description" maxLength={200} placeholder="on-call pager" />
              </Field>
            </div>
            <fieldset className="flex flex-wrap gap-x-4 gap-y-2">
              <legend className="mb-1 text-sm font-medium">Events</legend>
              {WEBHOOK_EVENTS.map((name) => (
                <label key={name} className="flex items-center gap-1.5 text-sm">
                  <input type="checkbox" name="events" value={name} defaultChecked />
                  <code className="text-xs">{name}</code>
                </label>
              ))}
            </fieldset>
            <div>
              <Button type="submit" disabled={create.isPending}>
                {create.isPending ? "Adding…" : "Add endpoint"}
              </Button>
            </div>
          </form>
          {create.error && <Alert className="mt-3">{create.error.message}</Alert>}
          {created && (
            <Alert tone="success" className="mt-3" data-testid="created-webhook">
              <p>
                Endpoint <strong>{created.url}</strong> added. Copy its signing secret now: it is shown only
                once.
              </p>
              <div className="bg-background text-foreground mt-2 flex items-center gap-1 rounded-md border p-1 pl-3">
                <code className="min-w-0 flex-1 text-xs break-all" data-testid="created-webhook-secret">
                  {created.secret}
                </code>
                <CopyButton value={created.secret} label="Copy signing secret" />
              </div>
            </Alert>
          )}
        </CardContent>
      </Card>

      <Card aria-labelledby="endpoints-heading">
        <CardHeader>
          <CardTitle id="endpoints-heading">Endpoints</CardTitle>
        </CardHeader>
        {endpoints.error && (
          <div className="p-5">
            <Alert>{endpoints.error.message}</Alert>
          </div>
        )}
        {endpoints.data?.length === 0 && (
          <EmptyState
            icon={Webhook}
            title="No endpoints yet"
            description="Add one to receive lifecycle events."
          />
        )}
        {endpoints.data && endpoints.data.length > 0 && (
          <Table aria-label="Webhook endpoints">
            <TableHeader>
              <TableRow>
                <TableHead>URL</TableHead>
                <TableHead>Events</TableHead>
                <TableHead>Added</TableHead>
                <TableHead>
                  <span className="sr-only">Actions</span>
                </TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {endpoints.data.map((endpoint) => (
                <TableRow key={endpoint.id} data-testid="webhook-row">
                  <TableCell>
                    <code className="text-xs break-all">{endpoint.url}</code>
                    {endpoint.description && (
                      <p className="text-muted-foreground text-xs">{endpoint.description}</p>
                    )}
                  </TableCell>
                  <TableCell className="text-xs">{endpoint.events.join(", ")}</TableCell>
                  <TableCell>
                    <RelativeTime value={endpoint.createdAt} />
                  </TableCell>
                  <TableCell>
                    <div className="flex justify-end gap-1">
                      <Button
                        variant="ghost"
                        size="sm"
                        disabled={test.isPending}
                        onClick={() => test.mutate({ tenantSlug, endpointId: endpoint.id })}
                      >
                        Send test
                      </Button>
                      <ConfirmDialog
                        title="Remove this endpoint?"
                        description="It receives no more events, and its delivery history goes with it."
                        confirmLabel="Remove endpoint"
                        onConfirm={() =>
                          remove.mutateAsync({ tenantSlug, endpointId: endpoint.id }).catch(() => {})
                        }
                        trigger={
                          <Button
                            variant="ghost"
                            size="sm"
                            className="text-destructive"
                            disabled={remove.isPending}
                          >
                            Remove
                          </Button>
                        }
                      />
                    </div>
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
      </Card>

      <WebhookDeliveries tenantSlug={tenantSlug} />
    </div>
  );
}
