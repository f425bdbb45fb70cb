"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ExternalLink, Link2, Trash2 } from "lucide-react";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { Notice, type NoticeMessage } from "../../_components/notice";
import { useTenantRole } from "../../_components/tenant-role";

const MIN_PORT = 1024;
const MAX_PORT = 65535;

/** The port typed into the form, or the reason it is not one a preview may use. */
function parsePort(text: string): { port: number } | { error: string } {
  const port = Number(text);
  if (!/^\d+$/.test(text.trim()) || port < MIN_PORT || port > MAX_PORT) {
    return { error: `A port between ${MIN_PORT} and ${MAX_PORT}.` };
  }
  return { port };
}

/**
 * Preview URLs of the workspace: the ports exposed on Berth's origin (`/p/<workspace>/<port>/`), each with
 * an Open link (a new tab, signed in as yourself) and a share link to copy (signed, expires in an hour).
 * Exposing and unexposing are admins'. Opening a preview does not keep the workspace awake.
 */
export function WorkspacePreviews({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("workspace:manage", false);
  const [portText, setPortText] = useState("");
  const [formError, setFormError] = useState<string | null>(null);
  const [message, setMessage] = useState<NoticeMessage | null>(null);
  const [shared, setShared] = useState<{ port: number; url: string; expiresAt: Date } | null>(null);
  const submitOnce = useSubmitOnce();
  const target = { tenantSlug, workspaceId };
  const previews = useQuery(trpc.workspace.previews.list.queryOptions(target));
  const refresh = () =>
    queryClient.invalidateQueries({ queryKey: trpc.workspace.previews.list.queryKey(target) });
  const onError = (error: { message: string }) => setMessage({ kind: "error", text: error.message });
  const expose = useMutation(
    trpc.workspace.previews.expose.mutationOptions({
      onSuccess: (result) => {
        setPortText("");
        setMessage({ kind: "success", text: `Port ${result.port} is exposed.` });
        void refresh();
      },
      onError,
    }),
  );
  const unexpose = useMutation(
    trpc.workspace.previews.unexpose.mutationOptions({
      onSuccess: (_result, input) => {
        setMessage({
          kind: "success",
          text: `Port ${input.port} is no longer exposed; its links stop working.`,
        });
        if (shared?.port === input.port) setShared(null);
        void refresh();
      },
      onError,
    }),
  );
  const share = useMutation(
    trpc.workspace.previews.shareLink.mutationOptions({
      onSuccess: (result, input) => setShared({ port: input.port, ...result }),
      onError,
    }),
  );

  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    const parsed = parsePort(portText);
    if ("error" in parsed) {
      setFormError(parsed.error);
      return;
    }
    setFormError(null);
    // Exposing is idempotent on the server (one row per port); this only drops a second click in flight.
    submitOnce(() => expose.mutateAsync({ ...target, port: parsed.port }));
  };

  return (
    <Card>
      <CardHeader>
        <CardTitle>Previews</CardTitle>
        <CardDescription>
          Ports of apps running in the workspace, opened on Berth&apos;s preview address (an origin apart from
          the dashboard&apos;s, so an app&apos;s scripts never act as you here). Only exposed ports are
          reachable: by members who may see this workspace, or by whoever holds a share link until it expires.
          Previews never keep the workspace awake.
        </CardDescription>
      </CardHeader>
      <CardContent className="grid gap-4">
        <Notice message={message} testId="previews-notice" />
        {previews.error ? <Alert>{previews.error.message}</Alert> : null}
        {previews.data && !previews.data.enabled ? (
          <Alert>
            Previews are off on this installation: an operator sets BERTH_PREVIEW_PORT to serve them on an
            origin of their own.
          </Alert>
        ) : previews.data && !previews.data.supported ? (
          <Alert>This workspace&apos;s backend does not offer previews.</Alert>
        ) : null}
        {!previews.data && !previews.error ? <Skeleton className="h-24 w-full" /> : null}
        {previews.data && previews.data.previews.length === 0 ? (
          <EmptyState
            title="No exposed ports"
            description="Expose the port an app listens on to preview it."
          />
        ) : null}
        {previews.data && previews.data.previews.length > 0 ? (
          <Table>
            <TableHeader>
              <TableRow>
                <TableHead>Port</TableHead>
                <TableHead>Exposed</TableHead>
                <TableHead className="text-right">Actions</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {previews.data.previews.map((preview) => (
                <TableRow key={preview.port} data-testid={`preview-${preview.port}`}>
                  <TableCell className="font-mono">{preview.port}</TableCell>
                  <TableCell>
                    <RelativeTime value={preview.createdAt} />
                  </TableCell>
                  <TableCell className="flex justify-end gap-2">
                    {preview.url ? (
                      <Button asChild variant="outline" size="sm">
                        <a href={preview.url} target="_blank" rel="noopener noreferrer">
                          <ExternalLink aria-hidden /> Open
                        </a>
                      </Button>
                    ) : null}
                    {canManage ? (
                      <>
                        <Button
                          variant="outline"
                          size="sm"
                          disabled={share.isPending}
                          onClick={() => share.mutate({ ...target, port: preview.port })}
                        >
                          <Link2 aria-hidden /> Share link
                        </Button>
                        <ConfirmDialog
                          title={`Unexpose port ${preview.port}?`}
                          description="Its URL and every share link stop working at once."
                          confirmLabel="Unexpose"
                          onConfirm={() => unexpose.mutateAsync({ ...target, port: preview.port })}
                          trigger={
                            <Button variant="ghost" size="sm" aria-label={`Unexpose port ${preview.port}`}>
                              <Trash2 aria-hidden />
                            </Button>
                          }
                        />
                      </>
                    ) : null}
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        ) : null}
        {shared ? (
          <div className="bg-muted flex items-center gap-2 rounded-md p-3 text-sm" data-testid="share-link">
            <span className="truncate font-mono">{shared.url}</span>
            <CopyButton value={shared.url} label="Copy share link" />
            <span className="text-muted-foreground shrink-0">
              expires <RelativeTime value={shared.expiresAt} />
            </span>
          </div>
        ) : null}
        {canManage ? (
          <form className="flex items-end gap-2" onSubmit={submit} noValidate>
            <Field label="Port" error={formError} className="w-40">
              <Input
                type="number"
                inputMode="numeric"
                min={MIN_PORT}
                max={MAX_PORT}
                value={portText}
                placeholder="3000"
                onChange={(event) => {
                  setPortText(event.target.value);
                  setFormError(null);
                }}
              />
            </Field>
            <Button type="submit" disabled={expose.isPending}>
              Expose
            </Button>
          </form>
        ) : null}
      </CardContent>
    </Card>
  );
}
