"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { ServerErrors } from "../agents/agent-ui";

/** An optional whole number from the form: empty → null (the installation's). */
const wholeOrNull = (text: string) => (text.trim() === "" ? null : Number(text));
const textOrNull = (text: string) => (text.trim() === "" ? null : text.trim());

/**
 * The tenant's own E2B team (admins, only where the installation runs E2B): its API key, stored sealed and
 * shown only as a hint, and the template, domain and minimum size of its sandboxes. Empty fields are the
 * installation's; an empty key field keeps the stored key.
 */
export function E2bCard({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const backends = useQuery(trpc.workspace.backends.queryOptions({ tenantSlug }));
  const runsE2b = backends.data?.available.some((option) => option.kind === "e2b") ?? false;
  const settings = useQuery({ ...trpc.backendSettings.e2b.queryOptions({ tenantSlug }), enabled: runsE2b });
  const onSuccess = (next: NonNullable<typeof settings.data>) => {
    queryClient.setQueryData(trpc.backendSettings.e2b.queryKey({ tenantSlug }), next);
    toast.success("E2B settings saved.");
  };
  const save = useMutation(trpc.backendSettings.setE2b.mutationOptions({ onSuccess }));
  const clear = useMutation(trpc.backendSettings.clearE2b.mutationOptions({ onSuccess }));
  if (!runsE2b) return null;

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const apiKey = formString(form, "apiKey").trim();
    save.mutate({
      tenantSlug,
      ...(apiKey ? { apiKey } : {}),
      template: textOrNull(formString(form, "template")),
      domain: textOrNull(formString(form, "domain")),
      minCpuCount: wholeOrNull(formString(form, "minCpuCount")),
      minMemoryMB: wholeOrNull(formString(form, "minMemoryMB")),
    });
  }

  const current = settings.data;
  return (
    <Card aria-labelledby="e2b-heading" data-testid="settings-e2b">
      <CardHeader>
        <div>
          <CardTitle id="e2b-heading">E2B team</CardTitle>
          <CardDescription>
            Run this tenant&apos;s E2B workspaces in its own E2B team. Empty fields use the
            installation&apos;s; existing sandboxes stay in the team that made them.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent className="grid gap-3 text-sm">
        {settings.error ? (
          <Alert>{settings.error.message}</Alert>
        ) : !current ? (
          <Skeleton className="h-32 w-full" />
        ) : (
          <form className="grid gap-3" onSubmit={submit} key={current.updatedAt?.toString() ?? "none"}>
            <Field
              label="API key"
              hint={
                current.apiKeyHint
                  ? `Stored: ${current.apiKeyHint}. Leave empty to keep it.`
                  : "The installation's key applies."
              }
            >
              <Input name="apiKey" type="password" autoComplete="off" placeholder="e2b_…" />
            </Field>
            <Field label="Template">
              <Input name="template" defaultValue={current.template ?? ""} placeholder="installation's" />
            </Field>
            <Field label="Domain">
              <Input name="domain" defaultValue={current.domain ?? ""} placeholder="installation's" />
            </Field>
            <div className="grid grid-cols-2 gap-3">
              <Field label="Min vCPU">
                <Input name="minCpuCount" type="number" min={1} defaultValue={current.minCpuCount ?? ""} />
              </Field>
              <Field label="Min memory (MB)">
                <Input name="minMemoryMB" type="number" min={128} defaultValue={current.minMemoryMB ?? ""} />
              </Field>
            </div>
            <div className="flex flex-wrap gap-2">
              <Button type="submit" disabled={save.isPending}>
                Save
              </Button>
              {current.configured && (
                <Button
                  variant="outline"
                  disabled={clear.isPending}
                  onClick={() => clear.mutate({ tenantSlug, confirm: true })}
                >
                  Use the installation&apos;s team
                </Button>
              )}
            </div>
            <ServerErrors error={save.error ?? clear.error} />
          </form>
        )}
      </CardContent>
    </Card>
  );
}
